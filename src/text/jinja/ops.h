#pragma once
// Python operators on engine values (ops.cpp).
#include <string_view>

#include "text/jinja/value.h"

namespace densa::jinja {

class Interp;
// + - * / // % ** with Python's rules (int / float promotion, str and list concatenation and
// repetition, floor division and modulo signs); fails like Python on type errors.
Value binary_op(Interp& in, std::string_view op, const Value& a, const Value& b);
// Python `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace densa::jinja
