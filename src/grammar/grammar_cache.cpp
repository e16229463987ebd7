#include "grammar/grammar_cache.h"

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace densa::grammar {

const char* grammar_kind_name(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonSchema: return "json_schema";
    case GrammarKind::kJsonObject: return "json_object";
    case GrammarKind::kRegex: return "regex";
    case GrammarKind::kGbnf: return "gbnf";
    case GrammarKind::kCustom: return "custom";
  }
  return "?";
}

Result<Grammar> build_grammar(GrammarKind kind, std::string_view source) {
  switch (kind) {
    case GrammarKind::kJsonSchema: return grammar_from_json_schema(source);
    case GrammarKind::kJsonObject: return grammar_json_object();
    case GrammarKind::kRegex: return grammar_from_regex(source);
    case GrammarKind::kGbnf: return grammar_from_gbnf(source);
    case GrammarKind::kCustom: break;
  }
  return invalid_argument("build_grammar: a custom grammar needs a builder");
}

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity, CompileLimits limits)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity), limits_(limits) {}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(GrammarKind kind, const std::string& source) {
  if (kind == GrammarKind::kCustom) return invalid_argument("GrammarCache::get: use get_custom for custom grammars");
  const std::string key = kind == GrammarKind::kJsonObject ? std::string() : source;
  return lookup_or(Key{static_cast<int>(kind), key}, [&] { return build_grammar(kind, source); });
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get_custom(
    const std::string& key, const std::function<Result<Grammar>()>& build) {
  return lookup_or(Key{static_cast<int>(GrammarKind::kCustom), key}, build);
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::lookup_or(
    const Key& key, const std::function<Result<Grammar>()>& build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      ++hits_;
      return it->second.first;
    }
    ++misses_;
  }
  DENSA_ASSIGN_OR_RETURN(Grammar g, build());
  DENSA_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> compiled, compile(g, vocab_, limits_));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second.first;
  lru_.push_front(key);
  map_.emplace(key, std::make_pair(compiled, lru_.begin()));
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}
size_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
size_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace densa::grammar
