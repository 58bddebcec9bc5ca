#pragma once
// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i),
// so a tensor filled in parallel chunks is bit-identical for any thread count.
#include <cmath>
#include <cstdint>

namespace fucina::rng {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64 random bits for counter i of stream seed.
constexpr std::uint64_t bits(std::uint64_t seed, std::uint64_t i) { return splitmix64(splitmix64(seed) ^ (i * 0xd1b54a32d192ed03ull)); }

// Uniform in [0, 1) with 24 random bits.
constexpr float uniform(std::uint64_t seed, std::uint64_t i) {
  return static_cast<float>(bits(seed, i) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal (Box-Muller over two 32-bit halves of one draw; u1 in (0, 1]).
inline float normal(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t r = bits(seed, i);
  const double u1 = (static_cast<double>(r >> 32) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = static_cast<double>(r & 0xffffffffull) * (1.0 / 4294967296.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace fucina::rng
