#pragma once
// A tiny SVG plot writer for benchmark figures: line plots with markers (metric versus
// concurrency) and step plots (CDFs). Standalone text output, no dependencies, deterministic
// (the same data gives the same bytes), so regenerated figures diff cleanly.
#include <string>
#include <vector>

namespace densa {

struct PlotSeries {
  std::string name;
  std::vector<double> x;  // [points]
  std::vector<double> y;  // [points]
};

struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;     // log2 x axis, ticked at the x values of the data (concurrency 1,4,16,...)
  bool steps = false;     // draw as a staircase without markers (a CDF)
  bool y_from_zero = true;
  std::vector<PlotSeries> series;
  int width_px = 640;
  int height_px = 400;
};

// The SVG document for `spec`. Series with no points are listed in the legend only.
std::string render_svg_plot(const PlotSpec& spec);

// An empirical CDF as a series: sorted values against i/n (starting at (min, 0)).
PlotSeries cdf_series(std::string name, std::vector<double> values);

// "Nice" tick positions (1, 2, 5 x 10^k steps) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace densa
