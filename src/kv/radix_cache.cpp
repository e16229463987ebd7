#include "kv/radix_cache.h"

#include <functional>
#include <queue>
#include <string>
#include <tuple>

namespace densa {

RadixCache::RadixCache(int32_t page_size) : page_size_(page_size) {
  CHECK(page_size > 0) << "page_size " << page_size;
  nodes_.emplace_back();
  nodes_[0].live = true;
  nodes_[0].root = true;
}

std::optional<RadixNodeId> RadixCache::root_of(std::string_view salt) const {
  if (salt.empty()) return kRoot;
  const auto it = salt_roots_.find(salt);
  if (it == salt_roots_.end()) return std::nullopt;
  return it->second;
}

RadixNodeId RadixCache::new_node() {
  if (!free_nodes_.empty()) {
    const RadixNodeId id = free_nodes_.back();
    free_nodes_.pop_back();
    node(id) = Node{};
    node(id).live = true;
    return id;
  }
  nodes_.emplace_back();
  nodes_.back().live = true;
  return RadixNodeId(static_cast<int32_t>(nodes_.size() - 1));
}

PrefixMatch RadixCache::match(std::span<const TokenId> tokens, int32_t max_tokens, std::string_view salt) const {
  PrefixMatch m;
  const std::optional<RadixNodeId> root = root_of(salt);
  if (!root) return m;
  RadixNodeId at = *root;
  std::vector<TokenId> key(static_cast<size_t>(page_size_));
  while (m.num_tokens + page_size_ <= max_tokens &&
         static_cast<int64_t>(m.num_tokens) + page_size_ <= static_cast<int64_t>(tokens.size())) {
    key.assign(tokens.begin() + m.num_tokens, tokens.begin() + m.num_tokens + page_size_);
    const auto& children = node(at).children;
    const auto it = children.find(key);
    if (it == children.end()) break;
    at = it->second;
    m.pages.push_back(node(at).page);
    m.tags.push_back(node(at).tag);
    m.num_tokens += page_size_;
    m.last_node = at;
  }
  return m;
}

void RadixCache::touch(const PrefixMatch& match) {
  if (!match.last_node) return;
  const uint64_t now = ++clock_;
  for (std::optional<RadixNodeId> at = match.last_node; at && !node(*at).root; at = node(*at).parent) {
    DCHECK(node(*at).live) << "touch of a removed node";
    node(*at).last_access = now;
  }
}

int32_t RadixCache::insert(std::span<const TokenId> tokens, const BlockTable& table, PagePool& pool,
                           std::string_view salt) {
  CHECK(static_cast<int64_t>(tokens.size()) >= table.num_tokens)
      << tokens.size() << " tokens for a table of " << table.num_tokens;
  const int32_t num_full = table.num_tokens / page_size_;
  if (num_full == 0) return 0;
  const uint64_t now = ++clock_;
  int32_t num_new = 0;
  std::optional<RadixNodeId> root = root_of(salt);
  const bool new_root = !root;
  if (new_root) {
    root = new_node();
    node(*root).root = true;
    node(*root).salt = std::string(salt);
    salt_roots_.emplace(std::string(salt), *root);
  }
  RadixNodeId at = *root;
  for (int32_t i = 0; i < num_full; ++i) {
    std::vector<TokenId> key(tokens.begin() + static_cast<int64_t>(i) * page_size_,
                             tokens.begin() + static_cast<int64_t>(i + 1) * page_size_);
    const PageId page = table.pages[i];
    const auto it = node(at).children.find(key);
    if (it != node(at).children.end()) {
      if (node(it->second).page != page) break;  // the trie holds another copy: keep it
      at = it->second;
      node(at).last_access = now;
      continue;
    }
    // A page held elsewhere in the trie cannot belong at this path; stop rather than alias.
    if (pool.held_by_cache(page)) break;
    const RadixNodeId child = new_node();
    Node& n = node(child);
    n.key = key;
    n.page = page;
    n.tag = table.tags[i];
    n.parent = at;
    n.last_access = now;
    node(at).children.emplace(std::move(key), child);
    page_to_node_.emplace(page.value, child);
    pool.mark_cached(page);
    ++num_new;
    at = child;
  }
  if (new_root && num_new == 0) {  // nothing was insertable: no empty root stays behind
    salt_roots_.erase(node(*root).salt);
    node(*root) = Node{};
    free_nodes_.push_back(*root);
  }
  return num_new;
}

void RadixCache::remove_leaf(RadixNodeId id, PagePool& pool) {
  Node& n = node(id);
  CHECK(n.live && !n.root && n.children.empty()) << "remove_leaf of node " << id.value;
  const RadixNodeId parent = *n.parent;
  node(parent).children.erase(n.key);
  page_to_node_.erase(n.page.value);
  pool.uncache(n.page);
  n = Node{};
  free_nodes_.push_back(id);
  // A salt's root goes with its last page, so salts seen once leave nothing behind.
  if (parent != kRoot && node(parent).root && node(parent).children.empty()) {
    salt_roots_.erase(node(parent).salt);
    node(parent) = Node{};
    free_nodes_.push_back(parent);
  }
}

int32_t RadixCache::evict(int32_t num_pages, PagePool& pool) {
  if (num_pages <= 0) return 0;
  using Entry = std::tuple<uint64_t, int32_t>;  // (last_access, node id): oldest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.live && !n.root && n.children.empty() && pool.refcount(n.page) == 0) {
      heap.emplace(n.last_access, static_cast<int32_t>(i));
    }
  }
  int32_t evicted = 0;
  while (evicted < num_pages && !heap.empty()) {
    const RadixNodeId id(std::get<1>(heap.top()));
    heap.pop();
    const RadixNodeId parent = *node(id).parent;
    remove_leaf(id, pool);
    ++evicted;
    const Node& p = node(parent);
    if (p.live && !p.root && p.children.empty() && pool.refcount(p.page) == 0) {
      heap.emplace(p.last_access, parent.value);
    }
  }
  return evicted;
}

int32_t RadixCache::num_evictable(const PagePool& pool) const {
  // A node is evictable when it and its whole subtree are unreferenced (depth <= context /
  // page_size, so recursion is shallow).
  int32_t total = 0;
  const std::function<bool(RadixNodeId)> visit = [&](RadixNodeId id) -> bool {
    bool all = true;
    for (const auto& [key, child] : node(id).children) all = visit(child) && all;
    if (node(id).root) return all;
    if (all && pool.refcount(node(id).page) == 0) {
      ++total;
      return true;
    }
    return false;
  };
  visit(kRoot);
  for (const auto& [salt, root] : salt_roots_) visit(root);
  return total;
}

void RadixCache::erase(std::span<const PageId> pages, PagePool& pool) {
  for (PageId page : pages) {
    const auto it = page_to_node_.find(page.value);
    if (it == page_to_node_.end()) continue;
    // Remove the subtree bottom-up.
    std::vector<RadixNodeId> order{it->second};
    for (size_t k = 0; k < order.size(); ++k) {
      for (const auto& [key, child] : node(order[k]).children) order.push_back(child);
    }
    for (auto r = order.rbegin(); r != order.rend(); ++r) remove_leaf(*r, pool);
  }
}

std::vector<PageId> RadixCache::pages() const {
  std::vector<PageId> out;
  out.reserve(page_to_node_.size());
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (nodes_[i].live && !nodes_[i].root) out.push_back(nodes_[i].page);
  }
  return out;
}

Status RadixCache::audit(const PagePool& pool) const {
  auto fail = [](const std::string& what) { return internal_error("radix_cache: " + what); };
  size_t num_live = 0;
  for (const auto& [salt, root] : salt_roots_) {
    const Node& r = node(root);
    if (!r.live || !r.root || r.parent) return fail("salt root " + std::to_string(root.value) + " is not a live root");
    if (r.children.empty()) return fail("salt root " + std::to_string(root.value) + " holds no pages");
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.live || n.root) continue;
    ++num_live;
    const std::string who = "node " + std::to_string(i) + " (page " + std::to_string(n.page.value) + ")";
    if (static_cast<int32_t>(n.key.size()) != page_size_) return fail(who + " key is not one page");
    if (!n.parent || !node(*n.parent).live) return fail(who + " has no live parent");
    const auto it = node(*n.parent).children.find(n.key);
    if (it == node(*n.parent).children.end() || it->second.value != static_cast<int32_t>(i)) {
      return fail(who + " is not its parent's child for its key");
    }
    if (!pool.held_by_cache(n.page)) return fail(who + " page not held by the cache in the pool");
    if (pool.tag(n.page) != n.tag) return fail(who + " tag changed: page reallocated while cached");
    const auto pn = page_to_node_.find(n.page.value);
    if (pn == page_to_node_.end() || pn->second.value != static_cast<int32_t>(i)) {
      return fail(who + " missing from the page index");
    }
    // A referenced node has referenced ancestors (see the header's invariant).
    if (pool.refcount(n.page) > 0 && !node(*n.parent).root && pool.refcount(node(*n.parent).page) == 0) {
      return fail(who + " is referenced under an unreferenced parent");
    }
  }
  if (num_live != page_to_node_.size()) return fail("page index size differs from live nodes");
  return Status::ok();
}

}  // namespace densa
