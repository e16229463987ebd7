#pragma once
// RadixCache: the prefix cache. A trie of full KV pages keyed by their tokens: the node at
// depth d holds the page with tokens [d*P, (d+1)*P) of every sequence whose first (d+1)*P
// tokens spell the path to it. A lookup compares token ids (std::map over the page's token
// vector), never a hash. The cache holds each of its pages through PagePool::mark_cached;
// requests reference them through ordinary refcounts. Pages with refcount 0 are evicted
// least-recently-used first, leaves before parents, only when the pool needs them.
//
// Tenants: every lookup and insert names a cache salt (a request's `cache_salt`; "" is the
// shared namespace). Each salt has its own root, so a request only ever matches pages that
// requests with the same salt computed, whatever their tokens; hits are still compared token
// by token.
//
// Invariant kept by insert(): a request's pages that are in the trie form a path from the
// root (insertion stops where the trie already holds a different page for the same tokens),
// so a referenced node has only referenced ancestors and every cached page is evictable.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"

namespace densa {

using RadixNodeId = StrongId<struct RadixNodeIdTag>;

// The longest cached prefix of a token sequence, in whole pages. Borrowed from the cache:
// valid until the next insert / evict / erase. The caller retains the pages to keep them.
struct PrefixMatch {
  std::vector<PageId> pages;           // [num_pages] in token order
  std::vector<uint32_t> tags;          // [num_pages] page tags when cached
  int32_t num_tokens = 0;              // num_pages * page_size
  std::optional<RadixNodeId> last_node;  // deepest matched node; nullopt for no match
};

class RadixCache {
 public:
  explicit RadixCache(int32_t page_size);

  // Longest prefix of `tokens` held in whole pages under `salt`, at most `max_tokens` tokens.
  // Pure.
  PrefixMatch match(std::span<const TokenId> tokens, int32_t max_tokens, std::string_view salt = {}) const;
  // Marks the matched path as just used (LRU).
  void touch(const PrefixMatch& match);

  // Adds the full pages of `table` (the first table.num_tokens / page_size pages, whose KV
  // is computed for `tokens`) to the trie, holding each new page with mark_cached. Stops at
  // the first page whose tokens the trie already holds with a different page. Returns the
  // number of newly held pages. Precondition: tokens.size() >= table.num_tokens.
  int32_t insert(std::span<const TokenId> tokens, const BlockTable& table, PagePool& pool,
                 std::string_view salt = {});

  // Evicts up to `num_pages` unreferenced pages, least recently used leaves first; each
  // becomes free. Returns how many were evicted.
  int32_t evict(int32_t num_pages, PagePool& pool);
  // Pages evict() could free now (unreferenced nodes whose whole subtree is unreferenced).
  int32_t num_evictable(const PagePool& pool) const;

  // Drops the nodes holding any of `pages` and their subtrees from the trie (KV that must
  // never be served again, e.g. of a request that failed an integrity check).
  void erase(std::span<const PageId> pages, PagePool& pool);

  int32_t page_size() const { return page_size_; }
  int32_t num_pages() const { return static_cast<int32_t>(page_to_node_.size()); }
  // Every page the cache holds, for kv_audit.
  std::vector<PageId> pages() const;
  // Trie consistency against the pool: each node's page is held, its tag current, parent and
  // child links agree, keys are one page of tokens. kInternal with the first violation.
  Status audit(const PagePool& pool) const;

 private:
  struct Node {
    std::vector<TokenId> key;                           // [page_size] tokens of this page
    PageId page;                                        // unused for the root
    uint32_t tag = 0;                                   // pool tag at insertion
    std::optional<RadixNodeId> parent;                  // nullopt for the root and free slots
    std::map<std::vector<TokenId>, RadixNodeId> children;  // exact token comparison
    uint64_t last_access = 0;
    bool live = false;
    bool root = false;                                  // kRoot or a salt's root: no page
    std::string salt;                                   // a salt's root: its salt
  };

  static constexpr RadixNodeId kRoot{0};

  Node& node(RadixNodeId id) { return nodes_[static_cast<size_t>(id.value)]; }
  const Node& node(RadixNodeId id) const { return nodes_[static_cast<size_t>(id.value)]; }
  RadixNodeId new_node();
  // The root of `salt`'s pages: kRoot for "", else its own root (nullopt when none yet).
  std::optional<RadixNodeId> root_of(std::string_view salt) const;
  // Removes a node with no children: uncaches its page and unlinks it from its parent.
  void remove_leaf(RadixNodeId id, PagePool& pool);

  int32_t page_size_;
  std::vector<Node> nodes_;                             // [0] is the root
  std::vector<RadixNodeId> free_nodes_;
  std::unordered_map<int32_t, RadixNodeId> page_to_node_;  // PageId.value -> holder
  std::map<std::string, RadixNodeId, std::less<>> salt_roots_;  // non-empty salt -> its root
  uint64_t clock_ = 0;
};

}  // namespace densa
