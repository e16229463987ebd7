#include "engine/disagg_ledger.h"

#include <cstring>
#include <string>

#include "kv/page_digest.h"

namespace densa {

bool DisaggLedger::release_export(RequestId id, PagePool& pool) {
  const auto it = exports_.find(id);
  if (it == exports_.end()) return false;
  pool.release_all(it->second.pages);
  exports_.erase(it);
  return true;
}

Result<KvImport> DisaggLedger::reserve_import(std::unique_ptr<Request> request, std::shared_ptr<RequestStream> stream,
                                              int32_t num_tokens, int32_t page_size, PagePool& pool,
                                              RadixCache& cache) {
  Request& r = *request;
  const int32_t num_pages = static_cast<int32_t>(pages_for_tokens(num_tokens, page_size));
  if (pool.num_free() < num_pages) cache.evict(num_pages - pool.num_free(), pool);
  if (!pool.allocate_into(num_pages, r.table)) {
    return resource_exhausted("no room for " + std::to_string(num_pages) + " KV pages of an import now; retry later");
  }
  KvImport im;
  im.id = r.id;
  im.num_tokens = num_tokens;
  im.pages = r.table.pages;
  im.tags = r.table.tags;
  imports_.emplace(r.id, Import{std::move(request), std::move(stream), num_tokens});
  return im;
}

std::optional<DisaggLedger::Import> DisaggLedger::take_import(RequestId id) {
  const auto it = imports_.find(id);
  if (it == imports_.end()) return std::nullopt;
  Import im = std::move(it->second);
  imports_.erase(it);
  return im;
}

std::optional<DisaggLedger::Import> DisaggLedger::cancel_import(RequestId id, PagePool& pool) {
  std::optional<Import> im = take_import(id);
  if (!im) return std::nullopt;
  pool.release_all(im->request->table.pages);
  im->request->table.clear();
  return im;
}

std::vector<DisaggLedger::Import> DisaggLedger::release_all(PagePool& pool) {
  for (auto& [id, table] : exports_) pool.release_all(table.pages);
  exports_.clear();
  std::vector<Import> out;
  for (auto& [id, im] : imports_) {
    pool.release_all(im.request->table.pages);
    im.request->table.clear();
    out.push_back(std::move(im));
  }
  imports_.clear();
  return out;
}

namespace {

Status import_size_mismatch(size_t num_pages, const KvImportData& data) {
  return data_loss("kv_transfer_failed: import of " + std::to_string(num_pages) + " pages got " +
                   std::to_string(data.digests.size()) + " digests and " + std::to_string(data.bytes.size()) + " bytes");
}

}  // namespace

Status DisaggLedger::adopt(PagePool& pool, const BlockTable& table, const KvImportData& data) {
  const size_t num_pages = table.pages.size();
  if (data.tags.size() != num_pages) return import_size_mismatch(num_pages, data);
  // Every check before the first write (write_pages checks the sizes first too).
  for (size_t k = 0; k < num_pages; ++k) {
    const PageId p = table.pages[k];
    if (pool.tag(p) != table.tags[k] || data.tags[k] != table.tags[k]) {
      return data_loss("kv_transfer_failed: page " + std::to_string(p.value) + " of the import has tag " +
                       std::to_string(pool.tag(p)) + ", reserved as " + std::to_string(table.tags[k]) +
                       ", written for " + std::to_string(data.tags[k]) + "; write rejected");
    }
  }
  return write_pages(pool, table.pages, data);
}

Status DisaggLedger::write_pages(PagePool& pool, std::span<const PageId> pages, const KvImportData& data) {
  const int64_t page_bytes = pool.page_bytes();
  if (data.digests.size() != pages.size() || !data.holds(pages.size(), page_bytes)) {
    return import_size_mismatch(pages.size(), data);
  }
  for (size_t k = 0; k < pages.size(); ++k) {
    std::memcpy(pool.page_data(pages[k]), data.page(k, page_bytes), static_cast<size_t>(page_bytes));
    const uint64_t found = page_digest(pool, pages[k]);
    if (found != data.digests[k]) {
      return data_loss("kv_transfer_failed: page " + std::to_string(k) + " of the import has digest " +
                       std::to_string(found) + ", expected " + std::to_string(data.digests[k]));
    }
  }
  return Status::ok();
}

void DisaggLedger::tables(std::vector<const BlockTable*>& out) const {
  for (const auto& [id, table] : exports_) out.push_back(&table);
  for (const auto& [id, im] : imports_) out.push_back(&im.request->table);
}

int32_t DisaggLedger::pinned_pages() const {
  int32_t n = 0;
  for (const auto& [id, table] : exports_) n += table.num_pages();
  for (const auto& [id, im] : imports_) n += im.request->table.num_pages();
  return n;
}

int64_t DisaggLedger::import_tokens() const {
  int64_t n = 0;
  for (const auto& [id, im] : imports_) n += im.request->num_tokens();
  return n;
}

}  // namespace densa
