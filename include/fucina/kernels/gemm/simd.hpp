#pragma once
// f32 vector shim for the GEMM kernels: maps a Fucina arch tag (arch.hpp) onto an xsimd 8.1
// batch and supplies the one operation xsimd gets wrong for us: a *fused* multiply-add
// (xsimd 8.1's avx512f `fma` is mul+add, which -ffp-contract=off keeps unfused).
#include <xsimd/xsimd.hpp>

#include <cmath>

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX2
#include <immintrin.h>
#endif
#if FUCINA_ARCH_NEON
#include <arm_neon.h>
#endif

namespace fucina::kernels::gemm {

// The f32 SIMD arm used for an arch tag: resolves through tag inheritance, so
// avx512vnni -> avx512, avxvnni -> avx2. Only declared; used in decltype.
arch::scalar simd_arm(arch::scalar);
#if FUCINA_ARCH_AVX2
arch::avx2 simd_arm(arch::avx2);
#endif
#if FUCINA_ARCH_AVX512
arch::avx512 simd_arm(arch::avx512);
#endif
#if FUCINA_ARCH_NEON
arch::neon simd_arm(arch::neon);
#endif

template <class Arch>
using simd_arm_t = decltype(simd_arm(Arch{}));

// Vec<Arch>: batch type, fused multiply-add and horizontal sum. Specialised per compiled
// SIMD arm; the scalar one lets the same loop templates build the portable path.
template <class Arch>
struct Vec;

// A one-lane "batch" with the slice of the xsimd interface the GEMM loops use.
struct ScalarBatch {
  float v = 0.0f;
  ScalarBatch() = default;
  explicit ScalarBatch(float x) : v(x) {}
  static ScalarBatch load_aligned(const float* p) noexcept { return ScalarBatch(*p); }
  static ScalarBatch load_unaligned(const float* p) noexcept { return ScalarBatch(*p); }
  void store_unaligned(float* p) const noexcept { *p = v; }
  void store_aligned(float* p) const noexcept { *p = v; }
  friend ScalarBatch operator+(ScalarBatch a, ScalarBatch b) noexcept { return ScalarBatch(a.v + b.v); }
};

template <>
struct Vec<arch::scalar> {
  using batch = ScalarBatch;
  static constexpr int lanes = 1;
  static batch fmadd(batch a, batch b, batch c) noexcept { return batch(std::fma(a.v, b.v, c.v)); }
  static float reduce(batch a) noexcept { return a.v; }
};

#if FUCINA_ARCH_AVX512
template <>
struct Vec<arch::avx512> {
  using batch = xsimd::batch<float, xsimd::avx512f>;
  static constexpr int lanes = 16;
  static batch fmadd(batch a, batch b, batch c) noexcept {
    return batch(_mm512_fmadd_ps(a, b, c));
  }
  static float reduce(batch a) noexcept { return xsimd::hadd(a); }
};
#endif
#if FUCINA_ARCH_AVX2
template <>
struct Vec<arch::avx2> {
  using batch = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static constexpr int lanes = 8;
  static batch fmadd(batch a, batch b, batch c) noexcept {
    return batch(_mm256_fmadd_ps(a, b, c));
  }
  static float reduce(batch a) noexcept { return xsimd::hadd(a); }
};
#endif
#if FUCINA_ARCH_NEON
template <>
struct Vec<arch::neon> {
  using batch = xsimd::batch<float, xsimd::neon64>;
  static constexpr int lanes = 4;
  static batch fmadd(batch a, batch b, batch c) noexcept {
    return batch(vfmaq_f32(c, a, b));
  }
  static float reduce(batch a) noexcept { return xsimd::hadd(a); }
};
#endif

}  // namespace fucina::kernels::gemm
