#pragma once
// The pushdown parser over a FlatGrammar (internal to src/grammar). A parse state is a set of
// stacks; a stack is a chain of nodes in an arena (node = position + parent node), shared by
// the stacks that grew from it, and named by its top node. The top of every live stack is a
// terminal position; the frames below hold return positions (never kEnd: a call in the last
// element of an alternative replaces its frame instead of pushing, so loops keep constant
// depth). A stack that ran off its bottom is a marker: kAccept (the grammar is complete) at
// run time, kEscape (the unknown context of the rule a precomputation started in).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "grammar/flat_grammar.h"

namespace densa::grammar {

constexpr int32_t kAccept = -1;
constexpr int32_t kEscape = -2;

class Pda {
 public:
  explicit Pda(const FlatGrammar& g) : g_(&g) {}

  struct Node {
    int32_t pos;
    int32_t parent;
  };

  size_t mark() const { return nodes_.size(); }
  void truncate(size_t mark) { nodes_.resize(mark); }
  const Node& node(int32_t id) const { return nodes_[id]; }
  int32_t pos(int32_t id) const { return nodes_[id].pos; }

  // Appends to out the live stacks (and markers) that (pos, parent) expands to.
  void close(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
    begin_closure();
    close_from(pos, parent, out);
  }

  // The stacks at the start of `rule` with `bottom` below it.
  void start(int32_t rule, int32_t bottom, std::vector<int32_t>& out) {
    begin_closure();
    for (int32_t a : g_->alts[rule]) close_from(a, bottom, out);
  }

  // Appends to out (from index out_begin on, deduplicated) what the stacks in[begin, end)
  // become after byte b. `in` may be `out`.
  void advance(const std::vector<int32_t>& in, size_t begin, size_t end, uint8_t b,
               std::vector<int32_t>& out) {
    const size_t out_begin = out.size();
    begin_closure();
    for (size_t i = begin; i < end; ++i) {
      const int32_t id = in[i];
      if (id < 0) continue;
      const Node n = nodes_[id];
      if (g_->sets[g_->elems[n.pos]].has(b)) close_from(n.pos + 1, n.parent, out);
    }
    dedupe(out, out_begin);
  }

  // Removes stacks equal by (position, parent) from out[begin, end()).
  void dedupe(std::vector<int32_t>& out, size_t begin) {
    if (out.size() - begin < 2) return;
    auto key = [this](int32_t id) -> int64_t {
      return id < 0 ? id : (int64_t{nodes_[id].pos} << 32) | static_cast<uint32_t>(nodes_[id].parent);
    };
    std::sort(out.begin() + begin, out.end(),
              [&](int32_t a, int32_t b) { return key(a) < key(b); });
    out.erase(std::unique(out.begin() + begin, out.end(),
                          [&](int32_t a, int32_t b) { return key(a) == key(b); }),
              out.end());
  }

  // Copies the stacks reachable from `tops` into a fresh arena (renumbering `tops`), so a
  // long-lived parse does not keep every node it ever made.
  void compact(std::vector<int32_t>& tops) {
    std::vector<int32_t> remap(nodes_.size(), -3);
    std::vector<Node> fresh;
    auto copy = [&](auto&& self, int32_t id) -> int32_t {
      if (id < 0) return id;
      if (remap[id] != -3) return remap[id];
      const int32_t parent = self(self, nodes_[id].parent);
      fresh.push_back(Node{nodes_[id].pos, parent});
      return remap[id] = static_cast<int32_t>(fresh.size() - 1);
    };
    for (auto& t : tops) t = copy(copy, t);
    nodes_ = std::move(fresh);
  }

 private:
  // One closure (close, start or advance) visits each (position, parent) once, and resumes
  // each (position, parent) frame once: a second path to the same place adds the same stacks.
  // Without this, empty alternatives and nested optionals (`(?:a|||)?` repeated, say) reach
  // one place along exponentially many paths, and each path rebuilt the rest of the closure.
  void close_from(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
    if (!first_visit(pos, parent, 0)) return;
    const int32_t e = g_->elems[pos];
    if (is_terminal(e)) {
      out.push_back(make(pos, parent));
    } else if (e == kEnd) {
      if (parent < 0) out.push_back(parent);
      else resume(parent, out);
    } else {
      expand(element_rule(e), pos + 1, parent, out);
    }
  }

  int32_t make(int32_t pos, int32_t parent) {
    nodes_.push_back(Node{pos, parent});
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  // Continues the stack `id` whose top is a return position.
  void resume(int32_t id, std::vector<int32_t>& out) {
    const Node n = nodes_[id];
    if (!first_visit(n.pos, n.parent, 1)) return;
    const int32_t e = g_->elems[n.pos];
    if (is_terminal(e)) out.push_back(id);
    else expand(element_rule(e), n.pos + 1, n.parent, out);
  }

  // Calls `rule` returning to position `next` over `parent`.
  void expand(int32_t rule, int32_t next, int32_t parent, std::vector<int32_t>& out) {
    const int32_t frame = g_->elems[next] == kEnd ? parent : make(next, parent);
    for (int32_t a : g_->alts[rule]) close_from(a, frame, out);
  }

  // The visited set of the current closure: open addressing over keys stamped with the
  // closure's generation, so starting a closure clears nothing.
  void begin_closure() {
    if (++generation_ == 0) {  // wrapped: old stamps could match again
      std::fill(stamps_.begin(), stamps_.end(), 0u);
      generation_ = 1;
    }
    used_ = 0;
  }
  bool first_visit(int32_t pos, int32_t parent, uint64_t kind) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 33) | (kind << 32) |
                         static_cast<uint32_t>(parent);
    if ((used_ + 1) * 2 > keys_.size()) grow();
    const size_t mask = keys_.size() - 1;
    for (size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;; i = (i + 1) & mask) {
      if (stamps_[i] != generation_) {
        stamps_[i] = generation_;
        keys_[i] = key;
        ++used_;
        return true;
      }
      if (keys_[i] == key) return false;
    }
  }
  void grow() {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<uint32_t> old_stamps = std::move(stamps_);
    const size_t cap = std::max<size_t>(64, old_keys.size() * 2);
    keys_.assign(cap, 0);
    stamps_.assign(cap, 0);
    const size_t mask = cap - 1;
    for (size_t j = 0; j < old_keys.size(); ++j) {
      if (old_stamps[j] != generation_) continue;
      size_t i = static_cast<size_t>((old_keys[j] * 0x9E3779B97F4A7C15ull) >> 20) & mask;
      while (stamps_[i] == generation_) i = (i + 1) & mask;
      stamps_[i] = generation_;
      keys_[i] = old_keys[j];
    }
  }

  const FlatGrammar* g_;
  std::vector<Node> nodes_;
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> stamps_;
  uint32_t generation_ = 0;
  size_t used_ = 0;
};

}  // namespace densa::grammar
