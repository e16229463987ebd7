#pragma once
// The start-up check that the KV pool's size fits every index type it flows through. A pool
// (or a batch, or a request) too large for one of them would not fail loudly at run time: the
// index would wrap and a kernel would read or write the wrong memory (a peer engine's int32
// element offset wrapped above 2^31 elements per layer and silently read the wrong KV). So the
// largest value each index can take is computed from the configuration before anything is
// allocated, and a configuration where one overflows is refused, naming the index and its width.
#include <cstdint>

#include "core/status.h"
#include "kernels/kv_view.h"

namespace densa {

struct KvIndexBounds {
  int64_t num_pages = 0;             // pages in the pool
  int64_t max_running_requests = 0;  // sequences in one batch
  int64_t max_request_tokens = 0;    // prompt + completion of one request (context, pool)
  int64_t max_step_tokens = 0;       // tokens of one batch
};

// ok, or out_of_range naming the first index that would overflow: page ids (int32: PageId,
// block tables, KvView::block_table), the pool's byte offsets (int64: KvView::page_ptr plus a
// page's row / scale / index offsets, the largest of which is the pool's last byte), a
// request's token slots (int32: BlockTable::num_tokens, positions, rounded up to whole pages),
// a batch's concatenated block-table offsets (int32: KvView::block_offsets) and a batch's token
// rows (int32: ForwardBatch positions / logit rows).
Status check_kv_index_widths(const KvLayout& layout, const KvIndexBounds& bounds);

}  // namespace densa
