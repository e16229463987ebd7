#pragma once
// Prometheus text exposition format 0.0.4, the pieces both /metrics endpoints (the server's,
// server/metrics.h, and the router's, router/router_metrics.h) write: a family's HELP / TYPE
// header, single samples, and cumulative histograms.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace densa::api {

// Cumulative histogram with fixed upper bounds (seconds). Not thread-safe: the owner locks.
struct Histogram {
  std::vector<double> bounds;    // [num_buckets] ascending upper bounds; +Inf implied
  std::vector<uint64_t> counts;  // [num_buckets + 1] observations per bucket (not cumulative)
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// A sample value as Prometheus reads it: "%.9g".
std::string prometheus_number(double v);
// "# HELP <name> <help>\n# TYPE <name> <type>\n"
void append_family_header(std::string& out, const char* name, const char* help, const char* type);
// A family of one sample: the header, then "<name> <value>\n".
void append_single(std::string& out, const char* name, const char* help, const char* type, const std::string& value);
// A histogram family of one histogram: _bucket{le=...} (cumulative, then +Inf), _sum, _count.
void append_histogram(std::string& out, const char* name, const char* help, const Histogram& h);
// A histogram family with one histogram per value of `label` (values[k] labels hs[k]).
void append_histogram_family(std::string& out, const char* name, const char* help, const char* label,
                             std::span<const char* const> values, std::span<const Histogram> hs);

}  // namespace densa::api
