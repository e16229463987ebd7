#include "api/prometheus.h"

#include <algorithm>
#include <cstdio>

namespace densa::api {
namespace {

// One histogram's samples; `labels` is empty or "k=\"v\"" without braces.
void append_buckets(std::string& out, const char* name, const std::string& labels, const Histogram& h) {
  const std::string open = labels.empty() ? "{" : "{" + labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out += std::string(name) + "_bucket" + open + "le=\"" + prometheus_number(h.bounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_bucket" + open + "le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  out += std::string(name) + "_sum" + own + " " + prometheus_number(h.sum) + "\n";
  out += std::string(name) + "_count" + own + " " + std::to_string(h.count) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t idx = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[idx];
  sum += value;
  ++count;
}

std::string prometheus_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void append_family_header(std::string& out, const char* name, const char* help, const char* type) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void append_single(std::string& out, const char* name, const char* help, const char* type, const std::string& value) {
  append_family_header(out, name, help, type);
  out += std::string(name) + " " + value + "\n";
}

void append_histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  append_family_header(out, name, help, "histogram");
  append_buckets(out, name, "", h);
}

void append_histogram_family(std::string& out, const char* name, const char* help, const char* label,
                             std::span<const char* const> values, std::span<const Histogram> hs) {
  append_family_header(out, name, help, "histogram");
  for (size_t k = 0; k < hs.size(); ++k) append_buckets(out, name, std::string(label) + "=\"" + values[k] + "\"", hs[k]);
}

}  // namespace densa::api
