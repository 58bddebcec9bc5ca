#pragma once
// Private: the loop every packed AVX512-VNNI kernel shares -- groups of 16 weight rows, then
// tiles of up to kActTile activation rows, with a row mask for a partial last group.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "fucina/quant/packed.hpp"

namespace fucina::quant::detail {

// 8: an 8-stream decode step unpacks each weight chunk once (tiles of 4 unpacked it twice;
// batch8 rows of bench_inference: Q4_K 3.59 -> 3.2 ms, Q6_K 2.78 -> 2.29 ms).
inline constexpr int kActTile = 8;

// tile(std::integral_constant<int, t>{}, args...) for a runtime t in 1..T.
template <int T, class Tile, class... Args>
void call_tile(int t, Tile& tile, Args&&... args) {
  if constexpr (T > 1)
    if (t < T) return call_tile<T - 1>(t, tile, args...);
  tile(std::integral_constant<int, T>{}, args...);
}

// Makes the compiler keep the object at `p` in memory: a tile's running float sums, touched
// once per block, so that at T = 8 its dot chains get the registers.
inline void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Calls tile(std::integral_constant<int, T>{}, g, a, out, row_mask) for every group g in
// [g0, g1) and every run of T <= kActTile activation rows: a[i] is activation row i0 + i
// (Act blocks, act_stride bytes apart), out[i] its 16 outputs of group g in y.
template <class Act, class Tile>
void for_each_act_tile(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                       std::int64_t act_stride, std::int64_t n_act, float* y, std::int64_t ldy, Tile&& tile) {
  for (std::int64_t g = g0; g < g1; ++g) {
    const std::int64_t valid = std::min<std::int64_t>(kPackRows, w.rows() - g * kPackRows);
    const auto mask = static_cast<std::uint16_t>(valid >= kPackRows ? 0xffffu : (1u << valid) - 1u);
    for (std::int64_t i0 = 0; i0 < n_act; i0 += kActTile) {
      const Act* a[kActTile];
      float* out[kActTile];
      const int t = static_cast<int>(std::min<std::int64_t>(kActTile, n_act - i0));
      for (int i = 0; i < t; ++i) {
        a[i] = reinterpret_cast<const Act*>(act + (i0 + i) * act_stride);
        out[i] = y + (i0 + i) * ldy + g * kPackRows;
      }
      call_tile<kActTile>(t, tile, g, a, out, mask);
    }
  }
}

}  // namespace fucina::quant::detail
