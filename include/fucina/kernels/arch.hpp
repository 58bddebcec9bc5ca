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

// Note [Arch macros]: the one place that reads the compiler's ISA macros (__AVX2__, ...).
// FUCINA_ARCH_<X> is 1 when arm X is compiled into this build, else 0; files include this
// header and test them with #if to compile intrinsics in or out (tests/architecture checks
// that no other file reads the compiler's macros). FUCINA_SCALAR sets them all to 0.
//  - AVX2: AVX2 + FMA3 + F16C (x86-64-v3). AVXVNNI: AVX-VNNI on top of AVX2.
//  - AVX512: AVX-512 F/BW/DQ/VL on top of AVX2 (x86-64-v4). AVX512VNNI: VNNI on top of AVX512.
//    AVX512BF16: vdpbf16ps on top of AVX512.
//  - NEON: AArch64 Advanced SIMD. SIMD: any arm may be compiled (xsimd's default arch,
//    the widest the compiler enables). GFNI: Galois-field byte ops on top of AVX512.
#if !defined(FUCINA_SCALAR) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FUCINA_ARCH_AVX2 1
#else
#define FUCINA_ARCH_AVX2 0
#endif
#if FUCINA_ARCH_AVX2 && defined(__AVXVNNI__)
#define FUCINA_ARCH_AVXVNNI 1
#else
#define FUCINA_ARCH_AVXVNNI 0
#endif
#if FUCINA_ARCH_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__)
#define FUCINA_ARCH_AVX512 1
#else
#define FUCINA_ARCH_AVX512 0
#endif
#if FUCINA_ARCH_AVX512 && defined(__AVX512VNNI__)
#define FUCINA_ARCH_AVX512VNNI 1
#else
#define FUCINA_ARCH_AVX512VNNI 0
#endif
#if FUCINA_ARCH_AVX512 && defined(__AVX512BF16__)
#define FUCINA_ARCH_AVX512BF16 1
#else
#define FUCINA_ARCH_AVX512BF16 0
#endif
#if FUCINA_ARCH_AVX512 && defined(__GFNI__)
#define FUCINA_ARCH_GFNI 1
#else
#define FUCINA_ARCH_GFNI 0
#endif
#if !defined(FUCINA_SCALAR) && (defined(__ARM_NEON) || defined(__ARM_NEON__)) && defined(__aarch64__)
#define FUCINA_ARCH_NEON 1
#else
#define FUCINA_ARCH_NEON 0
#endif
#if !defined(FUCINA_SCALAR)
#define FUCINA_ARCH_SIMD 1
#else
#define FUCINA_ARCH_SIMD 0
#endif

namespace fucina::kernels::arch {

inline constexpr bool kHasAvx2 = FUCINA_ARCH_AVX2;
inline constexpr bool kHasAvxVnni = FUCINA_ARCH_AVXVNNI;
inline constexpr bool kHasAvx512 = FUCINA_ARCH_AVX512;
inline constexpr bool kHasAvx512Vnni = FUCINA_ARCH_AVX512VNNI;
inline constexpr bool kHasNeon = FUCINA_ARCH_NEON;

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
