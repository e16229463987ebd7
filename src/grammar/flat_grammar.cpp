#include "grammar/flat_grammar.h"

#include <algorithm>
#include <map>

namespace densa::grammar {

namespace {

using Kind = Grammar::Kind;

class Lowerer {
 public:
  Lowerer(const Grammar& g, FlatGrammar& f, size_t max_elements)
      : g_(g), f_(f), max_elements_(max_elements) {}

  Status run() {
    const auto& rules = g_.rules();
    inline_.assign(rules.size(), 0);
    for (size_t r = 0; r < rules.size(); ++r)
      if (rules[r].body >= 0 && static_cast<int32_t>(r) != g_.root())
        inline_[r] = leaf_size(rules[r].body) <= kInlineElements;
    for (const auto& r : rules) {
      f_.alts.emplace_back();
      f_.rule_names.push_back(r.name);
    }
    for (size_t r = 0; r < rules.size(); ++r) {
      // Undefined rules are unreferenced (checked before); inlined rules live where used.
      if (rules[r].body < 0 || inline_[r]) continue;
      origin_ = static_cast<int32_t>(r);
      emit(static_cast<int32_t>(r), {}, {rules[r].body}, -1);
      if (!status_.is_ok()) return status_;
    }
    f_.root = g_.root();
    return status_;
  }

 private:
  int32_t new_rule() {
    f_.alts.emplace_back();
    f_.rule_names.push_back(f_.rule_names[origin_] + "#" + std::to_string(f_.alts.size()));
    return static_cast<int32_t>(f_.alts.size() - 1);
  }

  int32_t set_index(const ByteSet& s) {
    auto it = set_ids_.find(s.words);
    if (it != set_ids_.end()) return it->second;
    f_.sets.push_back(s);
    const int32_t id = static_cast<int32_t>(f_.sets.size() - 1);
    set_ids_.emplace(s.words, id);
    return id;
  }

  void finish(int32_t rule, std::vector<int32_t> cur, int32_t tail) {
    if (tail >= 0) cur.push_back(ref_element(tail));
    if (f_.elems.size() + cur.size() + 1 > max_elements_) {
      if (status_.is_ok())
        status_ = out_of_range("grammar too large: over " + std::to_string(max_elements_) +
                               " elements after expanding repetitions (rule '" +
                               f_.rule_names[origin_] + "')");
      return;
    }
    f_.alts[rule].push_back(static_cast<int32_t>(f_.elems.size()));
    f_.elems.insert(f_.elems.end(), cur.begin(), cur.end());
    f_.elems.push_back(kEnd);
  }

  // The rule matching `items` then `tail` (a rule id or -1), created when needed.
  int32_t continuation(std::vector<int32_t> items, int32_t tail) {
    if (items.empty()) return tail;
    const int32_t c = new_rule();
    emit(c, {}, std::move(items), tail);
    return c;
  }

  // Adds to `rule` alternatives matching `cur` (elements), then the nodes `items`, then a
  // tail call of `tail`.
  void emit(int32_t rule, std::vector<int32_t> cur, std::vector<int32_t> items, int32_t tail) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (!status_.is_ok()) return;
      const Grammar::Node& n = g_.nodes()[items[i]];
      switch (n.kind) {
        case Kind::kEmpty:
          break;
        case Kind::kBytes:
          cur.push_back(set_index(n.bytes));
          break;
        case Kind::kRef:
          if (inline_[n.rule]) {  // a small rule without calls: its body in place
            std::vector<int32_t> rest = {g_.rules()[n.rule].body};
            rest.insert(rest.end(), items.begin() + i + 1, items.end());
            emit(rule, std::move(cur), std::move(rest), tail);
            return;
          }
          cur.push_back(ref_element(n.rule));
          break;
        case Kind::kSeq: {
          std::vector<int32_t> rest(n.kids);
          rest.insert(rest.end(), items.begin() + i + 1, items.end());
          emit(rule, std::move(cur), std::move(rest), tail);
          return;
        }
        case Kind::kAlt: {
          const int32_t c = continuation({items.begin() + i + 1, items.end()}, tail);
          const int32_t target = cur.empty() ? rule : new_rule();
          for (int32_t k : n.kids) emit(target, {}, {k}, c);
          if (target != rule) finish(rule, std::move(cur), target);
          return;
        }
        case Kind::kRepeat: {
          if (static_cast<size_t>(n.min) > max_elements_ ||
              (n.max != kUnbounded && static_cast<size_t>(n.max) > max_elements_)) {
            status_ = out_of_range("grammar too large: repetition count " +
                                   std::to_string(n.max == kUnbounded ? n.min : n.max) +
                                   " in rule '" + f_.rule_names[origin_] + "'");
            return;
          }
          std::vector<int32_t> rest(items.begin() + i + 1, items.end());
          const int32_t c = continuation(std::move(rest), tail);
          const int32_t x = n.kids[0];
          int32_t loop;
          if (n.max == kUnbounded) {
            loop = new_rule();  // loop ::= x loop | c
            emit(loop, {}, {x}, loop);
            finish(loop, {}, c);
          } else {
            loop = c;  // o_j ::= x o_{j-1} | c, o_0 = c
            for (int32_t j = 0; j < n.max - n.min && status_.is_ok(); ++j) {
              const int32_t o = new_rule();
              emit(o, {}, {x}, loop);
              finish(o, {}, c);
              loop = o;
            }
          }
          std::vector<int32_t> head(static_cast<size_t>(n.min), x);
          if (head.empty()) {
            // Nothing mandatory: the loop's alternatives belong to `rule` via a tail call.
            finish(rule, std::move(cur), loop);
          } else {
            emit(rule, std::move(cur), std::move(head), loop);
          }
          return;
        }
      }
    }
    finish(rule, std::move(cur), tail);
  }

  // Rules of at most this many elements after expansion, calling no rules, are inlined where
  // referenced: a token then rarely has to leave the rule it started in (see README.md).
  static constexpr int64_t kInlineElements = 64;

  // Elements `node` expands to, or a number over kInlineElements when it calls a rule.
  int64_t leaf_size(int32_t node) const {
    const Grammar::Node& n = g_.nodes()[node];
    switch (n.kind) {
      case Kind::kEmpty: return 0;
      case Kind::kBytes: return 1;
      case Kind::kRef: return kInlineElements + 1;
      case Kind::kSeq:
      case Kind::kAlt: {
        int64_t total = 0;
        for (int32_t k : n.kids) {
          total += leaf_size(k);
          if (total > kInlineElements) break;
        }
        return total;
      }
      case Kind::kRepeat: {
        const int64_t copies = n.max == kUnbounded ? std::max<int64_t>(n.min, 1) + 1 : n.max;
        return std::min<int64_t>(leaf_size(n.kids[0]), kInlineElements + 1) * std::max<int64_t>(copies, 1) + 1;
      }
    }
    return kInlineElements + 1;
  }

  const Grammar& g_;
  FlatGrammar& f_;
  size_t max_elements_;
  std::vector<char> inline_;
  int32_t origin_ = 0;
  Status status_;
  std::map<std::array<uint64_t, 4>, int32_t> set_ids_;
};

// Refuses left recursion: a rule that can reach itself before consuming a byte.
Status check_left_recursion(const FlatGrammar& f) {
  const size_t n = f.alts.size();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t a : f.alts[r]) {
        bool all = true;
        for (int32_t p = a; f.elems[p] != kEnd; ++p) {
          const int32_t e = f.elems[p];
          if (is_terminal(e) || !nullable[element_rule(e)]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> calls(n);
  for (size_t r = 0; r < n; ++r)
    for (int32_t a : f.alts[r])
      for (int32_t p = a; f.elems[p] != kEnd; ++p) {
        const int32_t e = f.elems[p];
        if (is_terminal(e)) break;
        calls[r].push_back(element_rule(e));
        if (!nullable[element_rule(e)]) break;
      }
  std::vector<char> color(n, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    stack.emplace_back(static_cast<int32_t>(s), 0);
    color[s] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == calls[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t next = calls[r][i++];
      if (color[next] == 1)
        return invalid_argument("rule '" + f.rule_names[next] +
                                "' is left-recursive (it can reach itself without consuming "
                                "input, e.g. a repetition of something that can match empty)");
      if (color[next] == 0) {
        color[next] = 1;
        stack.emplace_back(next, 0);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<FlatGrammar> lower_grammar(const Grammar& g, size_t max_elements) {
  if (g.root() < 0) return invalid_argument("grammar has no root rule");
  for (const auto& n : g.nodes())
    if (n.kind == Kind::kRef && g.rules()[n.rule].body < 0)
      return invalid_argument("rule '" + g.rules()[n.rule].name +
                              "' is referenced but not defined");
  if (g.rules()[g.root()].body < 0)
    return invalid_argument("root rule '" + g.rules()[g.root()].name + "' is not defined");
  FlatGrammar f;
  Lowerer lowerer(g, f, max_elements);
  DENSA_RETURN_IF_ERROR(lowerer.run());
  DENSA_RETURN_IF_ERROR(check_left_recursion(f));
  return f;
}

}  // namespace densa::grammar
