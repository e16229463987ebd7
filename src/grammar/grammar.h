#pragma once
// A context-free grammar over bytes, as rules whose bodies are expression trees (literal bytes,
// byte sets, sequence, alternation, bounded / unbounded repetition, rule references). The front
// ends (json_schema.h, regex.h, gbnf.h) produce one; compiled_grammar.h lowers it to flat BNF
// and precomputes token masks. Grammars compose: import() copies another grammar's rules in,
// so a tool call is literal + schema grammar + literal, and several calls an alternation.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace densa::grammar {

// A set of bytes (bit b of words[b / 64]).
struct ByteSet {
  std::array<uint64_t, 4> words{};
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// Unicode code points as sorted, disjoint, non-adjacent inclusive ranges.
class CodepointSet {
 public:
  void add(uint32_t lo, uint32_t hi);  // lo <= hi
  void add(const CodepointSet& other);
  CodepointSet complement() const;     // within [0, 0x10FFFF], surrogates excluded
  CodepointSet minus(const CodepointSet& other) const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

constexpr int32_t kUnbounded = -1;

class Grammar {
 public:
  enum class Kind : uint8_t { kEmpty, kBytes, kSeq, kAlt, kRepeat, kRef };
  struct Node {
    Kind kind = Kind::kEmpty;
    ByteSet bytes;               // kBytes: one byte from the set
    std::vector<int32_t> kids;   // kSeq / kAlt; kRepeat: one kid
    int32_t min = 0;             // kRepeat
    int32_t max = 0;             // kRepeat; kUnbounded for no bound
    int32_t rule = -1;           // kRef
  };
  struct Rule {
    std::string name;
    int32_t body = -1;  // node id; -1 until defined
  };

  // Node builders; each returns a node id in this grammar.
  int32_t empty();
  int32_t bytes(const ByteSet& set);
  int32_t byte(uint8_t b);
  int32_t literal(std::string_view text);  // the exact bytes
  int32_t seq(std::vector<int32_t> kids);
  int32_t alt(std::vector<int32_t> kids);
  int32_t repeat(int32_t kid, int32_t min, int32_t max);
  int32_t optional(int32_t kid) { return repeat(kid, 0, 1); }
  int32_t star(int32_t kid) { return repeat(kid, 0, kUnbounded); }
  int32_t ref(int32_t rule);
  // One UTF-8 encoded code point from the set (an alternation of byte-range sequences).
  int32_t codepoints(const CodepointSet& set);

  // Rules: declare (so bodies can refer to it, recursion included), then define.
  int32_t add_rule(std::string name);
  void define_rule(int32_t rule, int32_t body);
  int32_t find_rule(std::string_view name) const;  // -1 when absent
  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }

  // Copies every rule of `other` in (names prefixed with `prefix`) and returns the rule id
  // that other's root has here.
  int32_t import(const Grammar& other, std::string_view prefix);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  int32_t push(Node n);
  std::vector<Node> nodes_;
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

// Grammars built from pieces: the literal bytes, a sequence and an alternation of whole
// grammars (each piece's rules imported). For a tool call:
//   sequence({literal_grammar("<tool_call>\n{\"name\": \"get\", \"arguments\": "),
//             schema_grammar, literal_grammar("}\n</tool_call>")})
Grammar literal_grammar(std::string_view text);
Grammar sequence_grammar(const std::vector<const Grammar*>& pieces);
Grammar alternation_grammar(const std::vector<const Grammar*>& choices);

// Appends the UTF-8 encoding of cp to out (cp <= 0x10FFFF).
void append_utf8(uint32_t cp, std::string& out);

}  // namespace densa::grammar
