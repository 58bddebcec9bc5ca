#pragma once
// ES noise: the perturbation of member stream k at iteration t is a pure function of
// (seed, t, k, parameter index), so it is regenerated, never stored.
//
// Note [ES noise contract]: the stream key is
//   key = splitmix64(bits(bits(seed ^ kSeedDomain, iteration), stream))
// and parameter indices 2p, 2p+1 share the draw r = splitmix64(key ^ p·kCounterMul)
// (= rng::bits(stream_seed, p)). Box-Muller in f32 over 24-bit uniforms:
//   u1 = ((r >> 40) + 1)·2^-24 in (0, 1],  u2 = (r & 0xffffff)·2^-24 in [0, 1),
//   index 2p -> sqrt(-2 ln u1)·cos(2π u2),  index 2p+1 -> the same with sin,
// with the Cephes f32 ln/sin/cos polynomials and the Newton sqrt below (branch-free, so loops over them
// vectorise). Changing any of this changes every ES run: it is a checkpoint contract.
#include <bit>
#include <cmath>
#include <cstdint>

#include "fucina/core/fast_math.hpp"

#include "fucina/core/rng.hpp"

namespace fucina::es {

inline constexpr std::uint64_t kSeedDomain = 0x65735f7365656473ull;  // "es_seeds"
inline constexpr std::uint64_t kCounterMul = 0xd1b54a32d192ed03ull;  // as rng::bits

namespace detail {

// cos(2πu) and sin(2πu) for u in [0, 1): quadrant j = round(4u), then Cephes
// polynomials on x = 2π(u - j/4) in [-π/4, π/4] (u - j/4 is exact for 24-bit u).
inline void fast_cos_sin_2pi(float u, float& c, float& s) {
  const int ji = static_cast<int>(4.f * u + 0.5f);  // round(4u); std::floor blocks vectorisation
  const float x = (u - 0.25f * static_cast<float>(ji)) * 6.28318530717958647f;
  const float z = x * x;
  float sp = -1.9515295891e-4f;
  sp = sp * z + 8.3321608736e-3f;
  sp = sp * z - 1.6666654611e-1f;
  const float sx = (sp * z) * x + x;
  float cp = 2.443315711809948e-5f;
  cp = cp * z - 1.388731625493765e-3f;
  cp = cp * z + 4.166664568298827e-2f;
  const float cx = ((cp * z) * z - 0.5f * z) + 1.f;
  const int q = ji & 3;
  const float a = (q & 1) != 0 ? sx : cx;  // cos(x + qπ/2) = ±a, sin(x + qπ/2) = ±b
  const float b = (q & 1) != 0 ? cx : sx;
  c = (q == 1 || q == 2) ? -a : a;
  s = q >= 2 ? -b : b;
}

// √x for x >= 0 without libm: a bit-trick guess and three Newton steps (relative error
// < 1e-6). Plain IEEE ops, so scalar and vectorised loops agree bit for bit (std::sqrt
// keeps its errno branch under -fmath-errno and blocks vectorisation).
inline float fast_sqrt(float x) {
  float y = std::bit_cast<float>(0x1fbd1df5u + (std::bit_cast<std::uint32_t>(x) >> 1));
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  return y;
}

// The two standard normals of one 64-bit draw (see Note [ES noise contract]).
inline void gaussian_pair(std::uint64_t r, float& even, float& odd) {
  const float u1 = static_cast<float>(static_cast<std::uint32_t>(r >> 40) + 1u) * 0x1p-24f;
  const float u2 = static_cast<float>(static_cast<std::uint32_t>(r & 0xffffffu)) * 0x1p-24f;
  const float rad = fast_sqrt(0.f - 2.f * fucina::fast_log(u1));  // 0 − 2l: +0, not −0, at u1 = 1
  float c, s;
  fast_cos_sin_2pi(u2, c, s);
  even = rad * c;
  odd = rad * s;
}

}  // namespace detail

// The key of noise stream `stream` at `iteration` (see Note [ES noise contract]).
constexpr std::uint64_t stream_key(std::uint64_t seed, std::uint64_t iteration, std::uint64_t stream) {
  const std::uint64_t stream_seed = rng::bits(rng::bits(seed ^ kSeedDomain, iteration), stream);
  return rng::splitmix64(stream_seed);
}

// Noise of stream `key` at parameter indices [begin, begin + n) into out[0..n).
inline void fill_noise(std::uint64_t key, std::uint64_t begin, std::int64_t n, float* out) {
  if (n <= 0) return;
  std::int64_t i = 0;
  if (begin & 1u) {  // odd start: the second half of a pair
    float e, o;
    detail::gaussian_pair(rng::splitmix64(key ^ ((begin >> 1) * kCounterMul)), e, o);
    out[i++] = o;
  }
  const std::uint64_t p0 = (begin + static_cast<std::uint64_t>(i)) >> 1;
  const std::int64_t pairs = (n - i) / 2;
  float* dst = out + i;
  for (std::int64_t p = 0; p < pairs; ++p) {
    float e, o;
    detail::gaussian_pair(rng::splitmix64(key ^ ((p0 + static_cast<std::uint64_t>(p)) * kCounterMul)), e, o);
    dst[2 * p] = e;
    dst[2 * p + 1] = o;
  }
  i += 2 * pairs;
  if (i < n) {
    float e, o;
    detail::gaussian_pair(rng::splitmix64(key ^ ((p0 + static_cast<std::uint64_t>(pairs)) * kCounterMul)), e, o);
    out[i] = e;
  }
}

// ε of noise stream `stream` at (seed, iteration) for one parameter index: the pure
// function every process can evaluate. Members map to streams in es::Member.
inline float noise(std::uint64_t seed, std::uint64_t iteration, std::uint64_t stream, std::uint64_t param_index) {
  float e, o;
  const std::uint64_t key = stream_key(seed, iteration, stream);
  detail::gaussian_pair(rng::splitmix64(key ^ ((param_index >> 1) * kCounterMul)), e, o);
  return (param_index & 1u) ? o : e;
}

}  // namespace fucina::es
