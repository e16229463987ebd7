// matmul(): dispatch by ISA, the thread split over output rows, and the scalar kernel.
// The SIMD kernels live in matmul_avx2.cpp and matmul_avx512.cpp; the contract they share is
// described in kernels/internal/matmul_isa.h.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/halving_split.h"
#include "core/thread_pool.h"
#include "kernels/internal/matmul_isa.h"
#include "kernels/internal/matmul_quant_avx2.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/internal/matmul_quant_fallback.h"
#include "kernels/internal/scratch_slots.h"
#include "quant/dequantize.h"

namespace densa {
namespace matmul_internal {

namespace {

// A thread task should cost at least this many byte-equivalents (see row_cost below) so that
// the hand-off cost of the pool stays small next to the work.
constexpr int64_t kMinTaskBytes = 256 * 1024;
// A GEMM splits each thread's share into up to this many parts whose sizes halve
// (core/halving_split.h), so the parts claimed last are small.
constexpr int64_t kPartsPerThread = 5;
// Parts are whole row tiles: 16 rows (INT4 8-row and INT8 16-row tiles) for a decode GEMV's
// one part per thread, 32 rows for a GEMM's parts (the VNNI GEMM runs 16-row tiles in pairs,
// and a part with an odd tile runs that one alone).
constexpr int64_t kRowTile = 16;
constexpr int64_t kGemmRowTile = 32;

bool matmul_supports(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0: return true;
    case DType::kFP8E4M3:
    case DType::kI4:
    case DType::kI8:
    case DType::kI32:
    case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: return false;
  }
  return false;
}

MatmulRowsFn rows_fn(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return matmul_rows_scalar;
    case CpuIsa::kAvx2: return matmul_rows_avx2;
    case CpuIsa::kAvx512Bf16: return matmul_rows_avx512;
  }
  return matmul_rows_scalar;
}

// Scalar kernel: per (i, r), four fp32 accumulators; element j of a block goes to lane j % 4;
// the lanes are summed as (l0 + l1) + (l2 + l3). One weight block is decoded once and used for
// up to kScalarTile rows of x.
constexpr int kScalarTile = 4;

}  // namespace

void decode_elems(DType dtype, const uint8_t* row, int64_t begin, int64_t count, float* out) {
  // The reference dequantizer is exact for every unscaled dtype, so the scalar kernel shares it.
  // Scaled formats (FP8, INT4) never reach here: their scales are not part of a bare row.
  CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
        dtype == DType::kQ8_0 || dtype == DType::kQ4_0)
      << "matmul: unsupported weight dtype " << dtype_name(dtype);
  WeightView view;
  view.dtype = dtype;
  view.rows = 1;
  view.cols = begin + count;
  view.data = row;
  dequantize_row_range(view, 0, begin, count, out);
}

void matmul_rows_scalar(const WeightView& w, const float* x, int64_t n, float* y,
                        int64_t r_begin, int64_t r_end) {
  const int64_t cols = w.cols;
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* row = w.row_ptr(r);
    for (int64_t i0 = 0; i0 < n; i0 += kScalarTile) {
      const int nx = static_cast<int>(std::min<int64_t>(kScalarTile, n - i0));
      float acc[kScalarTile][4] = {};
      for (int64_t k0 = 0; k0 < cols; k0 += kBlockElems) {
        const int64_t len = std::min(kBlockElems, cols - k0);
        float wb[kBlockElems];
        decode_elems(w.dtype, row, k0, len, wb);
        for (int t = 0; t < nx; ++t) {
          const float* xr = x + (i0 + t) * cols + k0;
          for (int64_t j = 0; j < len; ++j) acc[t][j % 4] += wb[j] * xr[j];
        }
      }
      for (int t = 0; t < nx; ++t) y[(i0 + t) * w.rows + r] = (acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3]);
    }
  }
}

namespace {

// One product ready to run over any range of its output rows.
struct RowsJob {
  const MatmulJob* job = nullptr;
  enum class Kind { kPlain, kQuantAvx512, kQuantAvx2, kQuantFallback } kind = Kind::kPlain;
  MatmulRowsFn fn = nullptr;       // kPlain
  const uint8_t* xp = nullptr;     // kQuantAvx512, kQuantAvx2: prepared activations
  int64_t xp_at = 0;               // their offset in the call's buffer, until it exists
  int64_t xp_bytes = 0;            // their size, rounded up to 64 bytes
  int64_t row_cost = 1;            // byte-equivalents per output row (see run_jobs)

  // Rows [r_begin, r_end) on a thread whose scratch is ws.
  void run(int64_t r_begin, int64_t r_end, WorkerScratch& ws) const {
    const MatmulJob& j = *job;
    switch (kind) {
      case Kind::kPlain: return fn(j.w, j.x, j.n, j.y, r_begin, r_end);
      case Kind::kQuantAvx512: return matmul_quant_avx512_rows(j.w, xp, j.n, j.y, r_begin, r_end, ws);
      case Kind::kQuantAvx2: return matmul_quant_avx2_rows(j.w, xp, j.n, j.y, r_begin, r_end);
      case Kind::kQuantFallback: return matmul_quant_fallback_rows(j.w, j.x, j.n, j.y, r_begin, r_end);
    }
  }
};

// Where part p starts: (job, row). Thread t's share is the t-th of `threads` equal shares of the
// jobs' total cost, and its parts t * per .. t * per + per - 1 follow in row order with the
// weights of halving_weight. Rows are rounded to whole multiples of `tile` inside a job. Monotone in
// p, so the parts tile all rows once.
std::pair<size_t, int64_t> part_start(const std::vector<RowsJob>& jobs, int64_t total, int64_t threads, int64_t per,
                                      int64_t tile, int64_t p) {
  if (p >= threads * per) return {jobs.size(), 0};
  int64_t before = 0;  // weight of thread p / per's parts before p
  for (int64_t i = 0; i < p % per; ++i) before += halving_weight(per, i);
  const int64_t all = halving_total(per);
  // total * (p / per * all + before) / (threads * all) without overflow for any realistic total.
  int64_t target = static_cast<int64_t>(static_cast<__int128>(total) * (p / per * all + before) / (threads * all));
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t rows = jobs[j].job->w.rows, cost = jobs[j].row_cost * rows;
    if (target < cost) {
      int64_t r = (target / jobs[j].row_cost + tile / 2) / tile * tile;
      if (r >= rows) return {j + 1, 0};
      return {j, r};
    }
    target -= cost;
  }
  return {jobs.size(), 0};
}

void run_jobs(const std::vector<RowsJob>& jobs, ThreadPool* pool) {
  WorkerScratch own;
  int64_t total = 0;
  for (const RowsJob& j : jobs) total += j.row_cost * j.job->w.rows;
  const int threads = pool == nullptr ? 1 : pool->num_threads();
  // Split over output rows only: each y[i, r] is computed whole by one thread, so which thread
  // takes which part changes no result. Each thread gets an equal share of the cost; a GEMM
  // splits a share into up to kPartsPerThread parts whose sizes halve (half, a quarter, ...,
  // and two of the smallest), as long as the smallest keeps kMinTaskBytes. The parts are claimed
  // dynamically, largest first: a thread that falls behind (an interrupt, a slower share of
  // bandwidth) leaves its later, small parts to the others, so the threads finish within about
  // one small part of each other instead of one part of an equal split.
  // Decode GEMVs (every job n = 1) take one part per thread, so each thread streams one run of
  // rows per product with one claim (interleaved A/Bs on the preset shapes ran batch-1 decode
  // faster than with four parts).
  bool gemv = true;
  for (const RowsJob& j : jobs) gemv = gemv && j.job->n == 1;
  const int64_t per = threads > 1 && !gemv ? halving_rounds(total, threads, kMinTaskBytes, kPartsPerThread) : 1;
  if (threads == 1 || total < 2 * kMinTaskBytes) {
    for (const RowsJob& j : jobs) j.run(0, j.job->w.rows, kernels_internal::scratch_of(pool, 0, own));
    return;
  }
  const int64_t tile = gemv ? kRowTile : kGemmRowTile;
  const int64_t parts = threads * per;
  // Claim k (in claiming order) takes part (k % threads) * per + k / threads: when the threads
  // claim in turn, thread t runs parts t * per .. t * per + per - 1, one contiguous run of rows
  // (with 8-row INT4 tiles one sequential stream); the claims come in rounds of `threads` parts
  // of one weight, so the last claims are the smallest.
  pool->parallel_for_dynamic_on_workers(parts, [&](int worker, int64_t k_begin, int64_t k_end) {
    WorkerScratch& ws = pool->scratch(worker);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const int64_t p = k % threads * per + k / threads;
      auto [j, r] = part_start(jobs, total, threads, per, tile, p);
      const auto [j_end, r_end] = part_start(jobs, total, threads, per, tile, p + 1);
      for (; j < jobs.size() && (j < j_end || (j == j_end && r < r_end)); ++j, r = 0) {
        const int64_t stop = j == j_end ? r_end : jobs[j].job->w.rows;
        if (r < stop) jobs[j].run(r, stop, ws);
      }
    }
  });
}

// Rounds every listed job's x into its buffer. Prefill-sized work (x rows times columns summed
// over the jobs >= kMinPrepareElems) is split over the pool in runs of x rows, so the other
// threads do not wait on one; the bytes are the same either way.
constexpr int64_t kMinPrepareElems = 64 * 1024;
constexpr int64_t kPrepareRows = 16;

// One preparation: x's n rows rounded into xp for w's layout, or (rows set) rows[i] of the
// preparation src copied out as row i.
struct PrepareJob {
  const WeightView* w;
  const float* x;
  int64_t n;
  bool avx2;  // the AVX2 tile kernels' preparation, else the AVX-512 kernels'
  const int32_t* rows = nullptr;
  const uint8_t* src = nullptr;
  int64_t xp_at = 0, src_at = 0;  // offsets of xp and src in the call's buffer, until it exists
  uint8_t* xp = nullptr;

  void run(int64_t i0, int64_t i1, WorkerScratch& ws) const {
    if (rows != nullptr) {
      if (avx2) return matmul_quant_avx2_gather_rows(*w, src, rows, n, i0, i1, xp);
      return matmul_quant_avx512_gather_rows(*w, src, rows, n, i0, i1, xp);
    }
    if (avx2) return matmul_quant_avx2_prepare_rows(*w, x, n, i0, i1, xp);
    matmul_quant_avx512_prepare_rows(*w, x, n, i0, i1, xp, ws);
  }
};

// Runs the jobs over runs of kPrepareRows rows, split over the pool when they are prefill-sized
// (rows times columns summed over the jobs >= kMinPrepareElems); the bytes are the same either
// way.
void prepare_x(const std::vector<PrepareJob>& jobs, ThreadPool* pool) {
  int64_t elems = 0, units = 0;
  for (const PrepareJob& p : jobs) {
    elems += p.n * p.w->cols;
    units += (p.n + kPrepareRows - 1) / kPrepareRows;
  }
  if (units == 0) return;
  WorkerScratch own;
  auto run_units = [&](int worker, int64_t u_begin, int64_t u_end) {
    WorkerScratch& ws = kernels_internal::scratch_of(pool, worker, own);
    int64_t u = 0;
    for (const PrepareJob& p : jobs) {
      const int64_t count = (p.n + kPrepareRows - 1) / kPrepareRows;
      for (int64_t k = std::max(u_begin - u, int64_t{0}); k < std::min(count, u_end - u); ++k) {
        p.run(k * kPrepareRows, std::min(p.n, (k + 1) * kPrepareRows), ws);
      }
      u += count;
    }
  };
  if (pool == nullptr || pool->num_threads() == 1 || elems < kMinPrepareElems) return run_units(0, 0, units);
  pool->parallel_for_dynamic_on_workers(units, run_units);
}

}  // namespace

}  // namespace matmul_internal

namespace {

// Whether the 16-row tile layouts run at this process's level (cpu_isa(): the hardware's,
// capped by DENSA_ISA, so a capped process lays weights out as a CPU of that level would).
bool tiles16_run_here() {
  const int level = static_cast<int>(cpu_isa());
  return (matmul_internal::matmul_quant_avx512_int8_tiles_supported() && level >= static_cast<int>(CpuIsa::kAvx512Bf16)) ||
         (matmul_internal::matmul_quant_avx2_tiles_supported() && level >= static_cast<int>(CpuIsa::kAvx2));
}

}  // namespace

WeightLayout matmul_int4_layout() {
  if (matmul_runs_int4_layout(WeightLayout::kInt4Tiles16)) return WeightLayout::kInt4Tiles16;
  return matmul_runs_int4_layout(WeightLayout::kInt4Tiles8) ? WeightLayout::kInt4Tiles8 : WeightLayout::kRows;
}

bool matmul_runs_int4_layout(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRows: return true;
    case WeightLayout::kInt4Tiles8:
      return matmul_internal::matmul_quant_avx512_int4_tiles_supported() && cpu_isa() == CpuIsa::kAvx512Bf16;
    case WeightLayout::kInt4Tiles16: return tiles16_run_here();
    default: return false;
  }
}

bool matmul_prefers_int8_tiles() { return tiles16_run_here(); }

bool matmul_prefers_affine_tiles() { return tiles16_run_here(); }

bool matmul_fp8_on_amx(AmxUse use) {
  return cpu_isa() == CpuIsa::kAvx512Bf16 && matmul_internal::matmul_quant_fp8_amx(use);
}

bool matmul_bf16_on_amx(AmxUse use) {
  return cpu_isa() == CpuIsa::kAvx512Bf16 && matmul_internal::matmul_quant_bf16_amx(use);
}

namespace matmul_internal {

namespace {

// How product j runs at `isa`: its kernel, its cost per output row and its prepared bytes.
RowsJob rows_job(CpuIsa isa, const MatmulJob& j) {
  const WeightView& w = j.w;
  RowsJob r;
  r.job = &j;
  if (matmul_quant_fallback_supports(w.dtype)) {
    // FP8 / INT4 / INT8 / affine weights: the AVX-512 kernel where it applies, the AVX2 one
    // for the 16-row tile layouts (the same bits), else the reference-decoding fallback.
    if (isa == CpuIsa::kAvx512Bf16 && matmul_quant_avx512_supports(w)) {
      r.kind = RowsJob::Kind::kQuantAvx512;
      r.row_cost = matmul_quant_avx512_row_cost(w, j.n);
      r.xp_bytes = (matmul_quant_avx512_x_bytes(w, j.n) + 63) / 64 * 64;
    } else if (isa >= CpuIsa::kAvx2 && matmul_quant_avx2_supports(w)) {
      r.kind = RowsJob::Kind::kQuantAvx2;
      r.row_cost = matmul_quant_avx2_row_cost(w, j.n);
      r.xp_bytes = (matmul_quant_avx2_x_bytes(w, j.n) + 63) / 64 * 64;
    } else {
      r.kind = RowsJob::Kind::kQuantFallback;
      r.row_cost = matmul_quant_fallback_row_cost(w, j.n);
    }
  } else if ((w.dtype == DType::kBF16 || w.dtype == DType::kF16) && !j.f32_x && isa == CpuIsa::kAvx512Bf16 &&
             matmul_quant_avx512_supports(w)) {
    // BF16 / F16 on AMX tiles (matmul_quant_bf16_amx): the FP8 AMX kernel, x rounded to bf16.
    r.kind = RowsJob::Kind::kQuantAvx512;
    r.row_cost = matmul_quant_avx512_row_cost(w, j.n);
    r.xp_bytes = (matmul_quant_avx512_x_bytes(w, j.n) + 63) / 64 * 64;
  } else {
    CHECK(matmul_supports(w.dtype)) << "matmul: unsupported weight dtype " << dtype_name(w.dtype);
    CHECK(w.cols % dtype_block_elems(w.dtype) == 0) << "matmul: cols " << w.cols;
    r.fn = rows_fn(isa);
    // Its weight bytes plus n * cols multiply-adds (one multiply-add takes about as long as
    // streaming one weight byte on one core).
    r.row_cost = w.row_bytes() + j.n * w.cols;
  }
  r.row_cost = std::max<int64_t>(1, r.row_cost);
  return r;
}

// Products with gathered rows (MatmulJob::x_rows) on a path that cannot copy prepared rows: each
// becomes a product of its rows copied out in fp32 into the calling thread's scratch.
struct Fp32Copies {
  // One copy of rows of an x, shared by the products that read the same rows (an expert's gate
  // and up): its place in the scratch and its first row in the concatenation of all copies.
  struct Copy {
    const float* x;
    const int32_t* rows;
    int64_t n, cols, at, first;
  };
  std::vector<MatmulJob> jobs;  // reserved at the first add: the RowsJobs point into it
  std::vector<size_t> copy_of;  // per product, its copy
  std::vector<Copy> copies;
  size_t capacity;  // the most products a call adds
  int64_t bytes = 0, rows = 0, cols_max = 1;

  explicit Fp32Copies(size_t max_products) : capacity(max_products) {}
  const MatmulJob* add(const MatmulJob& j) {
    if (jobs.empty()) jobs.reserve(capacity);  // no allocation for the calls that copy nothing
    size_t c = 0;
    while (c < copies.size() && !(copies[c].x == j.x && copies[c].rows == j.x_rows && copies[c].n == j.n &&
                                  copies[c].cols == j.w.cols)) {
      ++c;
    }
    if (c == copies.size()) {
      copies.push_back({.x = j.x, .rows = j.x_rows, .n = j.n, .cols = j.w.cols, .at = bytes, .first = rows});
      bytes += (j.n * j.w.cols * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
      rows += j.n;
      cols_max = std::max(cols_max, j.w.cols);
    }
    MatmulJob own = j;
    own.x_rows = nullptr;
    own.x_rows_of = 0;
    jobs.push_back(own);
    copy_of.push_back(c);
    return &jobs.back();
  }
  // Every copy in one pass over the pool, split by rows of the concatenation.
  void copy(ThreadPool* pool, WorkerScratch& caller) {
    if (bytes == 0) return;
    uint8_t* base = caller.bytes(kernels_internal::kSlotMatmulCopies, static_cast<size_t>(bytes));
    parallel_for_elems(pool, rows, cols_max, [&](int64_t r0, int64_t r1) {
      for (const Copy& c : copies) {
        float* dst = reinterpret_cast<float*>(base + c.at);
        for (int64_t i = std::max(r0, c.first) - c.first; i < std::min(r1, c.first + c.n) - c.first; ++i) {
          std::copy_n(c.x + c.rows[i] * c.cols, c.cols, dst + i * c.cols);
        }
      }
    });
    for (size_t k = 0; k < jobs.size(); ++k) jobs[k].x = reinterpret_cast<const float*>(base + copies[copy_of[k]].at);
  }
};

// Where each quantized product's activations come from, as offsets into one buffer (returns its
// size): products of the same x in the same layout (Q, K and V; gate and up) share one
// preparation, and products whose rows are gathered from one x round that x once (`prepare`)
// and copy their rows out of it (`gather`).
int64_t plan_preparations(std::vector<RowsJob>& run, std::vector<PrepareJob>& prepare, std::vector<PrepareJob>& gather) {
  int64_t bytes = 0;
  auto same_layout = [](const PrepareJob& p, const RowsJob& r, bool avx2) {
    return p.avx2 == avx2 && (avx2 ? matmul_quant_avx2_same_x_layout(*p.w, r.job->w)
                                   : matmul_quant_avx512_same_x_layout(*p.w, r.job->w));
  };
  for (RowsJob& r : run) {
    const bool avx2 = r.kind == RowsJob::Kind::kQuantAvx2;
    if (r.kind != RowsJob::Kind::kQuantAvx512 && !avx2) continue;
    const MatmulJob& j = *r.job;
    std::vector<PrepareJob>& list = j.x_rows != nullptr ? gather : prepare;
    const PrepareJob* shared = nullptr;
    for (const PrepareJob& p : list) {
      if (p.x == j.x && p.n == j.n && p.rows == j.x_rows && same_layout(p, r, avx2)) shared = &p;
    }
    if (shared != nullptr) {
      r.xp_at = shared->xp_at;
      continue;
    }
    r.xp_at = bytes;
    bytes += r.xp_bytes;
    list.push_back({.w = &j.w, .x = j.x, .n = j.n, .avx2 = avx2, .rows = j.x_rows, .xp_at = r.xp_at});
    if (j.x_rows == nullptr) continue;
    PrepareJob& g = list.back();
    const PrepareJob* source = nullptr;
    for (const PrepareJob& p : prepare) {
      if (p.x == j.x && p.n == j.x_rows_of && p.rows == nullptr && same_layout(p, r, avx2)) source = &p;
    }
    if (source == nullptr) {
      const int64_t n = j.x_rows_of;
      const int64_t x_bytes = avx2 ? matmul_quant_avx2_x_bytes(j.w, n) : matmul_quant_avx512_x_bytes(j.w, n);
      prepare.push_back({.w = &j.w, .x = j.x, .n = n, .avx2 = avx2, .xp_at = bytes});
      bytes += (x_bytes + 63) / 64 * 64;
      source = &prepare.back();
    }
    g.src_at = source->xp_at;
  }
  return bytes;
}

}  // namespace

void matmul_many_with_isa(CpuIsa isa, std::span<const MatmulJob> jobs, ThreadPool* pool) {
  CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) << "matmul: isa " << cpu_isa_name(isa);
  std::vector<RowsJob> run;
  run.reserve(jobs.size());
  Fp32Copies copies(jobs.size());
  for (const MatmulJob& j : jobs) {
    if (j.n <= 0 || j.w.rows <= 0) continue;
    for (int64_t i = 0; j.x_rows != nullptr && i < j.n; ++i) {
      CHECK(j.x_rows[i] >= 0 && j.x_rows[i] < j.x_rows_of) << "matmul: x row " << j.x_rows[i] << " of " << j.x_rows_of;
    }
    RowsJob r = rows_job(isa, j);
    const bool copies_prepared = r.kind == RowsJob::Kind::kQuantAvx2 ||
                                 (r.kind == RowsJob::Kind::kQuantAvx512 && matmul_quant_avx512_gathers(j.w));
    if (j.x_rows != nullptr && !copies_prepared) r.job = copies.add(j);
    run.push_back(r);
  }
  if (run.empty()) return;
  // The buffers live in the calling thread's scratch (its pool slot, or this thread's own without
  // a pool), so a warm caller allocates nothing; the workers read them while the products run.
  thread_local WorkerScratch no_pool;
  WorkerScratch& caller = pool != nullptr ? pool->scratch(0) : no_pool;
  copies.copy(pool, caller);
  std::vector<PrepareJob> prepare, gather;
  const int64_t bytes = plan_preparations(run, prepare, gather);
  uint8_t* base = bytes > 0 ? caller.bytes(kernels_internal::kSlotMatmulX, static_cast<size_t>(bytes)) : nullptr;
  for (PrepareJob& p : prepare) p.xp = base + p.xp_at;
  for (PrepareJob& g : gather) {
    g.xp = base + g.xp_at;
    g.src = base + g.src_at;
  }
  for (RowsJob& r : run) {
    if (r.kind == RowsJob::Kind::kQuantAvx512 || r.kind == RowsJob::Kind::kQuantAvx2) r.xp = base + r.xp_at;
  }
  prepare_x(prepare, pool);
  prepare_x(gather, pool);
  run_jobs(run, pool);
}

void matmul_with_isa(CpuIsa isa, const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  const MatmulJob job{w, x, n, y};
  matmul_many_with_isa(isa, std::span<const MatmulJob>(&job, 1), pool);
}

}  // namespace matmul_internal

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  matmul_internal::matmul_with_isa(cpu_isa(), w, x, n, y, pool);
}

void matmul_many(std::span<const MatmulJob> jobs, ThreadPool* pool) {
  matmul_internal::matmul_many_with_isa(cpu_isa(), jobs, pool);
}

}  // namespace densa
