#pragma once
// Guided splits for dynamically claimed parts (parallel_for_elems, matmul's GEMM parts): each
// thread's share of the work in `rounds` parts whose sizes halve, claimed largest first, so the
// parts claimed last are small and the threads finish within about one small part of each other.
#include <cstdint>

namespace densa {

// Weight of part i of a share in `rounds` parts: 2^(rounds-2), ..., 2, 1, 1 (one part: 1).
inline int64_t halving_weight(int64_t rounds, int64_t i) {
  return i + 1 >= rounds ? 1 : int64_t{1} << (rounds - 2 - i);
}

// The weights of a share's `rounds` parts summed: 2^(rounds-1).
inline int64_t halving_total(int64_t rounds) { return int64_t{1} << (rounds - 1); }

// The most rounds, up to max_rounds, whose smallest part of one of `threads` equal shares of
// `total` is still at least min_part (at least 1 round).
inline int64_t halving_rounds(int64_t total, int64_t threads, int64_t min_part, int64_t max_rounds) {
  int64_t rounds = 1;
  while (rounds < max_rounds && total / (threads * halving_total(rounds + 1)) >= min_part) ++rounds;
  return rounds;
}

}  // namespace densa
