#include "grammar/flat_grammar.h"

#include <algorithm>
#include <map>
#include <memory>

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
      emit(static_cast<int32_t>(r), {}, view(&rules[r].body, 1, nullptr), -1);
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

  // The nodes still to emit: a list of spans of node ids whose tails are shared, so "the items
  // after this one" is O(1) to form and a sequence of n items costs O(n) memory, however many
  // continuation rules it spawns (a vector copy per continuation was O(n^2)).
  struct Span {
    std::shared_ptr<const std::vector<int32_t>> own;  // the viewed ids, when the span owns them
    const int32_t* begin = nullptr;
    const int32_t* end = nullptr;
    std::shared_ptr<const Span> next;
  };
  using Items = std::shared_ptr<const Span>;  // null: nothing left

  // `count` ids at `ids` (which must outlive the lowering: node kids, rule bodies), then `next`.
  static Items view(const int32_t* ids, size_t count, Items next) {
    if (count == 0) return next;
    return std::make_shared<const Span>(Span{nullptr, ids, ids + count, std::move(next)});
  }
  static Items owned(std::vector<int32_t> ids, Items next) {
    if (ids.empty()) return next;
    auto v = std::make_shared<const std::vector<int32_t>>(std::move(ids));
    const int32_t* b = v->data();
    return std::make_shared<const Span>(Span{v, b, b + v->size(), std::move(next)});
  }
  // The items after position `pos` of span `at`.
  static Items after(const Items& at, const int32_t* pos) {
    if (pos + 1 < at->end) return std::make_shared<const Span>(Span{at->own, pos + 1, at->end, at->next});
    return at->next;
  }

  // One pending emit: adds to `rule` alternatives matching `cur` (elements), then the nodes
  // of `items`, then a tail call of `tail` (a rule id or -1). An alternative or a repetition
  // first emits the items after it as a continuation rule, then its branches into rules that
  // end in that continuation; those emits are frames pushed above this one, and `phase`
  // says where this one resumes when they are done. The explicit stack replaces recursion:
  // a grammar's items nest as deep as its source is long (a sequence of 60,000 alternatives
  // overflowed the thread's stack).
  struct Frame {
    enum Phase : uint8_t {
      kWalk,             // emitting items
      kAltContinued,     // the continuation of an alternative is emitted
      kAltKids,          // emitting its branches, `k` done
      kRepeatContinued,  // the continuation of a repetition is emitted
      kRepeatUnbounded,  // its loop rule's body is emitted
      kRepeatBounded,    // emitting the optional copies, `k` done
      kRepeatCopy,       // copy `pending`'s body is emitted
    };
    int32_t rule;
    std::vector<int32_t> cur;
    Items at;                      // the span holding the current item (null: none left)
    const int32_t* pos = nullptr;  // the current item in `at`
    int32_t tail;
    Phase phase = kWalk;
    const Grammar::Node* node = nullptr;  // the alternative / repetition being emitted
    int32_t c = -1, target = -1, loop = -1, pending = -1;
    size_t k = 0;
  };

  void push(std::vector<Frame>& stack, int32_t rule, std::vector<int32_t> cur, Items items, int32_t tail) {
    Frame f{rule, std::move(cur), std::move(items), nullptr, tail};
    if (f.at) f.pos = f.at->begin;
    stack.push_back(std::move(f));
  }

  // Emits `items` into `rule` (see Frame), driving every pending emit to the end.
  void emit(int32_t rule, std::vector<int32_t> cur, Items items, int32_t tail) {
    std::vector<Frame> stack;
    push(stack, rule, std::move(cur), std::move(items), tail);
    while (!stack.empty() && status_.is_ok()) step(stack);
  }

  // Runs the top frame until it pushes a frame or ends. (References into `stack` die at a push.)
  void step(std::vector<Frame>& stack) {
    Frame& f = stack.back();
    switch (f.phase) {
      case Frame::kWalk:
        break;
      case Frame::kAltContinued:
        f.target = f.cur.empty() ? f.rule : new_rule();
        f.k = 0;
        f.phase = Frame::kAltKids;
        return;
      case Frame::kAltKids: {
        if (f.k < f.node->kids.size()) {
          const int32_t target = f.target, c = f.c;
          const int32_t* kid = &f.node->kids[f.k++];
          push(stack, target, {}, view(kid, 1, nullptr), c);
          return;
        }
        if (f.target != f.rule) finish(f.rule, std::move(f.cur), f.target);
        stack.pop_back();
        return;
      }
      case Frame::kRepeatContinued: {
        const int32_t* x = &f.node->kids[0];
        if (f.node->max == kUnbounded) {
          f.loop = new_rule();  // loop ::= x loop | c
          f.phase = Frame::kRepeatUnbounded;
          const int32_t loop = f.loop;
          push(stack, loop, {}, view(x, 1, nullptr), loop);
        } else {
          f.loop = f.c;  // o_j ::= x o_{j-1} | c, o_0 = c
          f.k = 0;
          f.phase = Frame::kRepeatBounded;
        }
        return;
      }
      case Frame::kRepeatUnbounded:
        finish(f.loop, {}, f.c);
        repeat_head(stack);
        return;
      case Frame::kRepeatBounded:
        if (static_cast<int64_t>(f.k) < static_cast<int64_t>(f.node->max) - f.node->min && status_.is_ok()) {
          f.pending = new_rule();
          f.phase = Frame::kRepeatCopy;
          const int32_t o = f.pending, loop = f.loop;
          push(stack, o, {}, view(&f.node->kids[0], 1, nullptr), loop);
          return;
        }
        repeat_head(stack);
        return;
      case Frame::kRepeatCopy:
        finish(f.pending, {}, f.c);
        f.loop = f.pending;
        ++f.k;
        f.phase = Frame::kRepeatBounded;
        return;
    }
    // kWalk: the items one by one; a sequence or an inlined rule replaces the current item
    // by its parts, an alternative or a repetition hands over to the frames above.
    while (f.at != nullptr) {
      if (f.pos == f.at->end) {
        f.at = f.at->next;
        if (f.at) f.pos = f.at->begin;
        continue;
      }
      if (!status_.is_ok()) return;
      const Grammar::Node& n = g_.nodes()[*f.pos];
      switch (n.kind) {
        case Kind::kEmpty:
          ++f.pos;
          break;
        case Kind::kBytes:
          f.cur.push_back(set_index(n.bytes));
          ++f.pos;
          break;
        case Kind::kRef:
          if (inline_[n.rule]) {  // a small rule without calls: its body in place
            f.at = view(&g_.rules()[n.rule].body, 1, after(f.at, f.pos));
            f.pos = f.at->begin;
            break;
          }
          f.cur.push_back(ref_element(n.rule));
          ++f.pos;
          break;
        case Kind::kSeq:
          f.at = view(n.kids.data(), n.kids.size(), after(f.at, f.pos));
          if (f.at) f.pos = f.at->begin;
          break;
        case Kind::kAlt:
        case Kind::kRepeat: {
          if (n.kind == Kind::kRepeat &&
              (static_cast<size_t>(n.min) > max_elements_ ||
               (n.max != kUnbounded && static_cast<size_t>(n.max) > max_elements_))) {
            status_ = out_of_range("grammar too large: repetition count " +
                                   std::to_string(n.max == kUnbounded ? n.min : n.max) +
                                   " in rule '" + f_.rule_names[origin_] + "'");
            return;
          }
          // The rule matching the items after this one then `tail`, created when needed.
          Items rest = after(f.at, f.pos);
          f.node = &n;
          f.phase = n.kind == Kind::kAlt ? Frame::kAltContinued : Frame::kRepeatContinued;
          f.at = nullptr;
          if (rest == nullptr) {
            f.c = f.tail;
            return;
          }
          f.c = new_rule();
          const int32_t c = f.c, tail = f.tail;
          push(stack, c, {}, std::move(rest), tail);
          return;
        }
      }
    }
    finish(f.rule, std::move(f.cur), f.tail);
    stack.pop_back();
  }

  // The end of a repetition: its mandatory copies, then the loop, in the frame's own rule.
  void repeat_head(std::vector<Frame>& stack) {
    Frame& f = stack.back();
    std::vector<int32_t> head(static_cast<size_t>(f.node->min), f.node->kids[0]);
    if (head.empty()) {
      // Nothing mandatory: the loop's alternatives belong to the rule via a tail call.
      finish(f.rule, std::move(f.cur), f.loop);
      stack.pop_back();
      return;
    }
    f.at = owned(std::move(head), nullptr);
    f.pos = f.at->begin;
    f.tail = f.loop;
    f.phase = Frame::kWalk;
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
