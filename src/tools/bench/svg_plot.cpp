#include "tools/bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace densa {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kNumColors = sizeof(kColors) / sizeof(kColors[0]);

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) {
    std::snprintf(buf, sizeof(buf), "%.0e", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.6g", v);
  }
  return buf;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

PlotSeries cdf_series(std::string name, std::vector<double> values) {
  PlotSeries s;
  s.name = std::move(name);
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  if (values.empty()) return s;
  s.x.push_back(values.front());
  s.y.push_back(0);
  for (size_t i = 0; i < values.size(); ++i) {
    s.x.push_back(values[i]);
    s.y.push_back(static_cast<double>(i + 1) / n);
  }
  return s;
}

std::string render_svg_plot(const PlotSpec& spec) {
  const double W = spec.width_px, H = spec.height_px;
  const double left = 72, right = 20, top = 36, bottom = 52;
  const double pw = W - left - right, ph = H - top - bottom;

  // Data ranges.
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  std::set<double> x_values;
  for (const PlotSeries& s : spec.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (spec.log_x && !(s.x[i] > 0)) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
      x_values.insert(s.x[i]);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (spec.y_from_zero) y_lo = std::min(0.0, y_lo);
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  std::vector<double> y_ticks = nice_ticks(y_lo, y_hi, 5);
  y_lo = std::min(y_lo, y_ticks.front());
  y_hi = std::max(y_hi, y_ticks.back());

  std::vector<double> x_ticks;
  double xl = x_lo, xh = x_hi;
  if (spec.log_x) {
    xl = std::log2(x_lo);
    xh = std::log2(x_hi);
    if (xh <= xl) xl -= 1, xh += 1;
    x_ticks.assign(x_values.begin(), x_values.end());
  } else {
    if (xh <= xl) xl -= 1, xh += 1;
    x_ticks = nice_ticks(xl, xh, 6);
    xl = std::min(xl, x_ticks.front());
    xh = std::max(xh, x_ticks.back());
  }
  const auto px = [&](double x) {
    const double v = spec.log_x ? std::log2(x) : x;
    return left + (v - xl) / (xh - xl) * pw;
  };
  const auto py = [&](double y) { return top + ph - (y - y_lo) / (y_hi - y_lo) * ph; };

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(W) + "\" height=\"" + fmt(H) +
       "\" viewBox=\"0 0 " + fmt(W) + " " + fmt(H) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + fmt(W / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + escape(spec.title) +
       "</text>\n";
  // Grid and ticks.
  for (double t : y_ticks) {
    const std::string y = fmt(py(t));
    o += "<line x1=\"" + fmt(left) + "\" y1=\"" + y + "\" x2=\"" + fmt(left + pw) + "\" y2=\"" + y +
         "\" stroke=\"#e0e0e0\"/>\n";
    o += "<text x=\"" + fmt(left - 6) + "\" y=\"" + y + "\" text-anchor=\"end\" dominant-baseline=\"middle\">" +
         tick_label(t) + "</text>\n";
  }
  for (double t : x_ticks) {
    const std::string x = fmt(px(t));
    o += "<line x1=\"" + x + "\" y1=\"" + fmt(top) + "\" x2=\"" + x + "\" y2=\"" + fmt(top + ph) +
         "\" stroke=\"#e0e0e0\"/>\n";
    o += "<text x=\"" + x + "\" y=\"" + fmt(top + ph + 16) + "\" text-anchor=\"middle\">" + tick_label(t) +
         "</text>\n";
  }
  o += "<rect x=\"" + fmt(left) + "\" y=\"" + fmt(top) + "\" width=\"" + fmt(pw) + "\" height=\"" + fmt(ph) +
       "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text x=\"" + fmt(left + pw / 2) + "\" y=\"" + fmt(H - 12) + "\" text-anchor=\"middle\">" +
       escape(spec.x_label) + "</text>\n";
  o += "<text transform=\"translate(16," + fmt(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       escape(spec.y_label) + "</text>\n";

  // Series.
  for (size_t si = 0; si < spec.series.size(); ++si) {
    const PlotSeries& s = spec.series[si];
    const char* color = kColors[si % kNumColors];
    std::string points;
    double prev_y = 0;
    bool first = true;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (spec.log_x && !(s.x[i] > 0)) continue;
      if (spec.steps && !first) points += fmt(px(s.x[i])) + "," + fmt(py(prev_y)) + " ";
      points += fmt(px(s.x[i])) + "," + fmt(py(s.y[i])) + " ";
      prev_y = s.y[i];
      first = false;
    }
    if (!points.empty()) {
      points.pop_back();
      o += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" points=\"" + points +
           "\"/>\n";
    }
    if (!spec.steps) {
      for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
        if (spec.log_x && !(s.x[i] > 0)) continue;
        o += "<circle cx=\"" + fmt(px(s.x[i])) + "\" cy=\"" + fmt(py(s.y[i])) + "\" r=\"3.5\" fill=\"" + color +
             "\"/>\n";
      }
    }
    // Legend entry.
    const double ly = top + 14 + 18 * static_cast<double>(si);
    o += "<line x1=\"" + fmt(left + pw - 150) + "\" y1=\"" + fmt(ly) + "\" x2=\"" + fmt(left + pw - 128) +
         "\" y2=\"" + fmt(ly) + "\" stroke=\"" + color + "\" stroke-width=\"3\"/>\n";
    o += "<text x=\"" + fmt(left + pw - 122) + "\" y=\"" + fmt(ly) + "\" dominant-baseline=\"middle\">" +
         escape(s.name) + "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace densa
