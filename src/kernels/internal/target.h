#pragma once
// The instruction sets SIMD kernel code is compiled for. The project builds for baseline
// x86-64; a function that uses wider instructions carries one of these per-function target
// attributes, and is only called after cpu_isa() / cpu_features say the CPU has them. One macro
// per attribute set, defined here only: a kernel file names the set it needs and never spells
// its own, so one name always means one set. The *_INLINE forms add always_inline: helpers
// that must fold into their callers (an out-of-line call would reload their constants, and a
// helper whose only effect is a prefetch may be deleted by GCC's pure-const pass). An inlined
// helper needs a set its callers' sets contain.

// AVX-512 F with VL and FMA: silu_mul, rows_combination.
#define DENSA_TARGET_AVX512_FMA __attribute__((target("avx512f,avx512vl,fma")))
#define DENSA_TARGET_AVX512_FMA_INLINE DENSA_TARGET_AVX512_FMA __attribute__((always_inline)) inline

// Plus BW: the DSA indexer's scores.
#define DENSA_TARGET_AVX512_BW __attribute__((target("avx512f,avx512vl,avx512bw,fma")))

// Plus BF16 and F16C: the fp32-activation matmul rows and the attention tile primitives.
#define DENSA_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))
#define DENSA_TARGET_AVX512_BF16_INLINE DENSA_TARGET_AVX512_BF16 __attribute__((always_inline)) inline

// BW with VNNI (no BF16): the affine-row kernels.
#define DENSA_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define DENSA_TARGET_AVX512_VNNI_INLINE DENSA_TARGET_AVX512_VNNI __attribute__((always_inline)) inline

// The affine 16-row tiles on AMX-INT8.
#define DENSA_TARGET_AVX512_VNNI_AMX_INT8 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma,amx-tile,amx-int8")))

// BF16, VNNI and VBMI: the FP8 / INT4 / INT8 matmul kernels and their activation preparation.
#define DENSA_TARGET_AVX512_QUANT \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c")))
#define DENSA_TARGET_AVX512_QUANT_INLINE DENSA_TARGET_AVX512_QUANT __attribute__((always_inline)) inline

// The same plus GFNI: INT4 in 8-row tiles.
#define DENSA_TARGET_AVX512_QUANT_GFNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,gfni")))
#define DENSA_TARGET_AVX512_QUANT_GFNI_INLINE DENSA_TARGET_AVX512_QUANT_GFNI __attribute__((always_inline)) inline

// The same plus AMX-BF16: FP8, BF16 and F16 matmuls on AMX tiles.
#define DENSA_TARGET_AVX512_QUANT_AMX_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,amx-tile,amx-bf16")))
#define DENSA_TARGET_AVX512_QUANT_AMX_BF16_INLINE \
  DENSA_TARGET_AVX512_QUANT_AMX_BF16 __attribute__((always_inline)) inline

// The same plus AMX-INT8: INT8 in 16-row tiles on AMX.
#define DENSA_TARGET_AVX512_QUANT_AMX_INT8 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx512vbmi,fma,f16c,amx-tile,amx-int8")))

// BF16 and VBMI (no VNNI) with AMX-BF16: paged attention on AMX tiles.
#define DENSA_TARGET_AVX512_VBMI_AMX_BF16                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi,fma,f16c,amx-tile," \
                        "amx-bf16")))
#define DENSA_TARGET_AVX512_VBMI_AMX_BF16_INLINE \
  DENSA_TARGET_AVX512_VBMI_AMX_BF16 __attribute__((always_inline)) inline

// AVX2 with FMA and F16C: the AVX2 matmul rows.
#define DENSA_TARGET_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
#define DENSA_TARGET_AVX2_F16C_INLINE DENSA_TARGET_AVX2_F16C __attribute__((always_inline)) inline

// The AVX2 tile kernels' GEMMs: GCC otherwise reassociates a group's chain of integer adds into
// a tree over all its products, which keeps them all live and spilled most of them.
#if defined(__clang__)
#define DENSA_NO_TREE_REASSOC
#else
#define DENSA_NO_TREE_REASSOC __attribute__((optimize("no-tree-reassoc")))
#endif

// AVX2 with FMA: the DSA indexer's AVX2 scores.
#define DENSA_TARGET_AVX2 __attribute__((target("avx2,fma")))

// AVX-512 F alone, and with FMA: the shared inline helpers hsum_avx512 and exp_ps, which fold
// into callers of any AVX-512 set above.
#define DENSA_TARGET_AVX512F_INLINE __attribute__((target("avx512f"), always_inline)) inline
#define DENSA_TARGET_AVX512F_FMA_INLINE __attribute__((target("avx512f,fma"), always_inline)) inline
