#pragma once
// Register-tiled f32 GEMM micro-kernels over packed panels, one per SIMD arm, plus the
// scalar twin every arm is tested against bit for bit.
//
// Note [Packed panels]: an A micro-panel holds kc x MR floats with element (i, p) at
// a[p * MR + i]; a B micro-panel holds kc x NR floats with (p, j) at b[p * NR + j]. Both are
// 64-byte aligned and zero-padded past the matrix edge. A micro-kernel computes, for every
// (i, j) of the MR x NR tile, acc = fma(a(i,p), b(p,j), acc) for p = 0..kc-1 ascending from
// acc = 0, then stores c = acc (add == false) or c = c + acc (add == true). That order is
// the contract: every arm yields the same bits, so results never depend on the arm chosen
// for a tile or on which thread ran it.

#include <cmath>
#include <cstdint>

#include "fucina/kernels/arch.hpp"
#include "fucina/kernels/gemm/simd.hpp"

namespace fucina::kernels::gemm {

// The portable twin, for any tile shape. c has unit column stride, row stride rs_c.
template <int MR, int NR>
inline void microkernel_scalar(std::int64_t kc, const float* a, const float* b, float* c,
                               std::int64_t rs_c, bool add) noexcept {
  float acc[MR][NR] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * MR;
    const float* bp = b + p * NR;
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = std::fma(ap[i], bp[j], acc[i][j]);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) c[i * rs_c + j] = add ? c[i * rs_c + j] + acc[i][j] : acc[i][j];
}

// The SIMD arm: MR rows x NV vectors of accumulators, A broadcast, B loaded per p.
template <class Arch, int MR, int NV>
inline void microkernel_simd(std::int64_t kc, const float* a, const float* b, float* c,
                             std::int64_t rs_c, bool add) noexcept {
  using V = Vec<Arch>;
  using batch = typename V::batch;
  constexpr int L = V::lanes;
  constexpr int NR = NV * L;
  batch acc[MR][NV];
  // Touch the C tile early: its first use is after the whole k loop.
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    __builtin_prefetch(c + i * rs_c, 1);
    __builtin_prefetch(c + i * rs_c + NR - 1, 1);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = batch(0.0f);
  }
  for (std::int64_t p = 0; p < kc; ++p) {
    batch bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = batch::load_aligned(b + p * NR + v * L);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const batch ai(a[p * MR + i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fmadd(ai, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * rs_c;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      batch r = acc[i][v];
      if (add) r = r + batch::load_unaligned(ci + v * L);
      r.store_unaligned(ci + v * L);
    }
  }
}

// MicroKernel<Arch>: the tile shape and kernel of one arm. Use MicroKernel<simd_arm_t<A>>.
template <class Arch>
struct MicroKernel;

template <>
struct MicroKernel<arch::scalar> {
  static constexpr int mr = 4;
  static constexpr int nr = 8;
  static void run(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t rs_c,
                  bool add) noexcept {
    microkernel_scalar<mr, nr>(kc, a, b, c, rs_c, add);
  }
};

#if FUCINA_ARCH_AVX512
// 14 x 32: 28 zmm accumulators + 2 B vectors + 1 broadcast of 32 registers.
template <>
struct MicroKernel<arch::avx512> {
  static constexpr int mr = 14;
  static constexpr int nr = 32;
  static void run(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t rs_c,
                  bool add) noexcept {
    microkernel_simd<arch::avx512, mr, 2>(kc, a, b, c, rs_c, add);
  }
};
#endif

#if FUCINA_ARCH_AVX2
// 6 x 16: 12 ymm accumulators + 2 B vectors + 1 broadcast of 16 registers.
template <>
struct MicroKernel<arch::avx2> {
  static constexpr int mr = 6;
  static constexpr int nr = 16;
  static void run(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t rs_c,
                  bool add) noexcept {
    microkernel_simd<arch::avx2, mr, 2>(kc, a, b, c, rs_c, add);
  }
};
#endif

#if FUCINA_ARCH_NEON
// 8 x 12: 24 q-register accumulators + 3 B vectors of 32 registers.
template <>
struct MicroKernel<arch::neon> {
  static constexpr int mr = 8;
  static constexpr int nr = 12;
  static void run(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t rs_c,
                  bool add) noexcept {
    microkernel_simd<arch::neon, mr, 3>(kc, a, b, c, rs_c, add);
  }
};
#endif

// Every distinct micro-kernel arm compiled into this build (for tests and benchmarks).
using compiled_microkernel_arms = arch::ArchList<
    arch::scalar
#if FUCINA_ARCH_AVX2
    , arch::avx2
#endif
#if FUCINA_ARCH_AVX512
    , arch::avx512
#endif
#if FUCINA_ARCH_NEON
    , arch::neon
#endif
    >;

}  // namespace fucina::kernels::gemm
