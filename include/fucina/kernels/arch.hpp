#pragma once
// Compile-time architecture tags for kernel dispatch.
//
// Note [Arch tags]: specialisation is compile-time only (no CPUID dispatch): the build's
// -march decides which arms exist and `best_arch` names the most capable one. Tags inherit
// like xsimd's, so a kernel overloaded on `scalar`, `avx2` and `avx512` resolves an
// `avx512vnni` tag to its `avx512` overload. Each tag's `compiled` says whether its arm is
// built in this translation unit; FUCINA_SCALAR compiles every SIMD arm out.
// xsimd 8.1 has no VNNI tags, and its avx512f `fma` is an unfused mul+add under
// -ffp-contract=off: use the intrinsic (_mm512_fmadd_ps) where fusion matters.

namespace fucina::kernels::arch {

#if !defined(FUCINA_SCALAR) && defined(__AVX2__) && defined(__FMA__)
inline constexpr bool kHasAvx2 = true;
#else
inline constexpr bool kHasAvx2 = false;
#endif
#if !defined(FUCINA_SCALAR) && defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__)
inline constexpr bool kHasAvxVnni = true;
#else
inline constexpr bool kHasAvxVnni = false;
#endif
#if !defined(FUCINA_SCALAR) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__)
inline constexpr bool kHasAvx512 = true;
#else
inline constexpr bool kHasAvx512 = false;
#endif
#if !defined(FUCINA_SCALAR) && defined(__AVX512VNNI__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
inline constexpr bool kHasAvx512Vnni = true;
#else
inline constexpr bool kHasAvx512Vnni = false;
#endif
#if !defined(FUCINA_SCALAR) && (defined(__ARM_NEON) || defined(__ARM_NEON__)) && defined(__aarch64__)
inline constexpr bool kHasNeon = true;
#else
inline constexpr bool kHasNeon = false;
#endif

// Portable code only; always compiled. f32 lanes per vector register in `lanes`.
struct scalar {
  static constexpr const char* name = "scalar";
  static constexpr int lanes = 1;
  static constexpr bool compiled = true;
};
// AArch64 Advanced SIMD (128-bit).
struct neon : scalar {
  static constexpr const char* name = "neon";
  static constexpr int lanes = 4;
  static constexpr bool compiled = kHasNeon;
};
// AVX2 + FMA3 (256-bit).
struct avx2 : scalar {
  static constexpr const char* name = "avx2";
  static constexpr int lanes = 8;
  static constexpr bool compiled = kHasAvx2;
};
// AVX-VNNI: the VEX-encoded int8 dot (vpdpbusd ymm) on top of AVX2.
struct avxvnni : avx2 {
  static constexpr const char* name = "avxvnni";
  static constexpr bool compiled = kHasAvxVnni;
};
// AVX-512 F/BW/DQ/VL (512-bit).
struct avx512 : avx2 {
  static constexpr const char* name = "avx512";
  static constexpr int lanes = 16;
  static constexpr bool compiled = kHasAvx512;
};
// AVX512-VNNI: EVEX vpdpbusd on top of AVX-512.
struct avx512vnni : avx512 {
  static constexpr const char* name = "avx512vnni";
  static constexpr bool compiled = kHasAvx512Vnni;
};

// A compile-time list of tags (for typed tests and per-arch instantiation).
template <class... Archs>
struct ArchList {};

namespace detail {
consteval auto pick_best() {
  if constexpr (kHasAvx512Vnni) return avx512vnni{};
  else if constexpr (kHasAvx512) return avx512{};
  else if constexpr (kHasAvxVnni) return avxvnni{};
  else if constexpr (kHasAvx2) return avx2{};
  else if constexpr (kHasNeon) return neon{};
  else return scalar{};
}
}  // namespace detail

// The most capable arm compiled into this build.
using best_arch = decltype(detail::pick_best());

}  // namespace fucina::kernels::arch
