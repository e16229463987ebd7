#pragma once
// JSON Schema (the subset OpenAI structured outputs accepts, see README.md) and json_object
// mode as grammars. Generated JSON has no whitespace except at most one space after each ','
// and ':', so every document the grammar allows is finite in whitespace. Object properties
// come in schema order; unsupported keywords are refused by name.
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"

namespace densa::grammar {

struct JsonSchemaLimits {
  size_t max_source_bytes = 1 << 20;
  int max_depth = 32;  // nesting of sub-schemas (a $ref starts a rule, not a deeper level)
};

Result<Grammar> grammar_from_json_schema(std::string_view schema_text,
                                         const JsonSchemaLimits& limits = {});
// From a parsed schema; nlohmann::json keeps object keys sorted, so properties come in
// alphabetical order here (pass the text to keep the schema's order).
Result<Grammar> grammar_from_json_schema_value(const nlohmann::json& schema,
                                               const JsonSchemaLimits& limits = {});
// Any JSON object (response_format json_object).
Grammar grammar_json_object();
// Any JSON value.
Grammar grammar_json_value();

}  // namespace densa::grammar
