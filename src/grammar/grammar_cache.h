#pragma once
// Compiled grammars by (kind, source text) for one vocabulary, least recently used dropped
// past a size bound. Thread-safe; compiling happens outside the lock (two threads asking for
// the same new grammar may both compile it, one result is kept).
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "grammar/compiled_grammar.h"

namespace densa::grammar {

enum class GrammarKind {
  kJsonSchema,  // source: the schema's JSON text
  kJsonObject,  // source ignored: any JSON object
  kRegex,       // source: the pattern
  kGbnf,        // source: the GBNF text
  kCustom,      // source: a caller-chosen key; the grammar comes from a builder
};

const char* grammar_kind_name(GrammarKind kind);

// The grammar for one of the text kinds (not kCustom).
Result<Grammar> build_grammar(GrammarKind kind, std::string_view source);

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity,
               CompileLimits limits = {});

  Result<std::shared_ptr<const CompiledGrammar>> get(GrammarKind kind, const std::string& source);
  // For composed grammars (e.g. tool calls): `key` names the grammar `build` makes.
  Result<std::shared_ptr<const CompiledGrammar>> get_custom(const std::string& key,
                                                            const std::function<Result<Grammar>()>& build);

  size_t size() const;
  size_t hits() const;
  size_t misses() const;

 private:
  using Key = std::pair<int, std::string>;
  Result<std::shared_ptr<const CompiledGrammar>> lookup_or(const Key& key,
                                                           const std::function<Result<Grammar>()>& build);

  std::shared_ptr<const Vocabulary> vocab_;
  size_t capacity_;
  CompileLimits limits_;
  mutable std::mutex mu_;
  std::list<Key> lru_;  // front: most recent
  std::map<Key, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<Key>::iterator>> map_;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace densa::grammar
