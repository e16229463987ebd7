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

  // The stacks at the start of `rule` with `bottom` below it.
  void start(int32_t rule, int32_t bottom, std::vector<int32_t>& out) {
    for (int32_t a : g_->alts[rule]) close(a, bottom, out);
  }

  // Appends to out (from index out_begin on, deduplicated) what the stacks in[begin, end)
  // become after byte b. `in` may be `out`.
  void advance(const std::vector<int32_t>& in, size_t begin, size_t end, uint8_t b,
               std::vector<int32_t>& out) {
    const size_t out_begin = out.size();
    for (size_t i = begin; i < end; ++i) {
      const int32_t id = in[i];
      if (id < 0) continue;
      const Node n = nodes_[id];
      if (g_->sets[g_->elems[n.pos]].has(b)) close(n.pos + 1, n.parent, out);
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
  int32_t make(int32_t pos, int32_t parent) {
    nodes_.push_back(Node{pos, parent});
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  // Continues the stack `id` whose top is a return position.
  void resume(int32_t id, std::vector<int32_t>& out) {
    const Node n = nodes_[id];
    const int32_t e = g_->elems[n.pos];
    if (is_terminal(e)) out.push_back(id);
    else expand(element_rule(e), n.pos + 1, n.parent, out);
  }

  // Calls `rule` returning to position `next` over `parent`.
  void expand(int32_t rule, int32_t next, int32_t parent, std::vector<int32_t>& out) {
    const int32_t frame = g_->elems[next] == kEnd ? parent : make(next, parent);
    for (int32_t a : g_->alts[rule]) close(a, frame, out);
  }

  const FlatGrammar* g_;
  std::vector<Node> nodes_;
};

}  // namespace densa::grammar
