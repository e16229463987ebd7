#pragma once
// Shared JSON building blocks for one grammar (internal to src/grammar): rules made on first
// use, so a schema with many strings has one string rule. Whitespace: ws() is an optional
// single space, used only after ',' and ':'.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace densa::grammar {

// Integers the JSON front end generates stay below this magnitude (at most 18 digits).
constexpr int64_t kIntegerLimit = 999999999999999999LL;

// Decimal integers in [lo, hi] (|lo|, |hi| <= kIntegerLimit), no leading zeros, no "-0".
int32_t integer_range(Grammar& g, int64_t lo, int64_t hi);

// Decimal numbers (no exponent) in [lo, hi], integers |lo|, |hi| <= kIntegerLimit; a fraction
// has at most 18 digits.
int32_t decimal_range(Grammar& g, int64_t lo, int64_t hi);

class JsonValueRules {
 public:
  explicit JsonValueRules(Grammar& g) : g_(g) {}

  int32_t value();    // any JSON value
  int32_t object();   // any JSON object
  int32_t string();   // any JSON string
  int32_t number();   // -?int(.digits{1,18})?([eE][+-]?digits{1,2})?, integer part < 1e18
  int32_t integer();  // -?(0|[1-9][0-9]{0,17})
  // A JSON string's contents and closing quote, differing from every name in `names` (keys
  // of additional properties). Until the key differs from all names it takes no escapes.
  int32_t key_not_in(const std::vector<std::string>& names);
  int32_t ws() { return g_.optional(g_.byte(' ')); }
  int32_t comma() { return g_.seq({g_.byte(','), ws()}); }

 private:
  int32_t string_rest();  // string contents then '"'
  Grammar& g_;
  int32_t value_ = -1, object_ = -1, string_ = -1, number_ = -1, integer_ = -1, rest_ = -1;
  std::map<std::vector<std::string>, int32_t> keys_;
};

}  // namespace densa::grammar
