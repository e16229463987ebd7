#pragma once
// Matrix products against a weight matrix in any stored dtype:
//   y[n, w.rows] = x[n, w.cols] . w^T       (fp32 activations, fp32 accumulation)
// Contract (batch invariance): every output element y[i, r] is computed with the same
// arithmetic and the same reduction order whatever n, the other rows of x, or the thread
// count, so a request's result never depends on what else is in the batch.
#include <cstdint>

#include "core/tensor_view.h"
#include "core/thread_pool.h"

namespace densa {

// x: [n, w.cols] row-major, y: [n, w.rows] row-major. pool may be null (single thread).
void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool);

}  // namespace densa
