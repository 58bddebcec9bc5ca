#pragma once
// Strided iteration shared by the untagged kernels: collapse mergeable axes, then visit
// every "row" (all indices but the last axis) with one offset per operand. Rows are
// split across the worker pool in chunks that depend only on the shape, so results
// never depend on the thread count.
#include <array>
#include <cstdint>

#include "fucina/core/raw_tensor.hpp"
#include "fucina/core/thread_pool.hpp"

namespace fucina::raw {

template <std::size_t K>
struct Layout {
  int rank = 0;
  Dims shape{};
  std::array<Dims, K> strides{};
};

// Merges axis i into i+1 wherever every operand is contiguous across the pair, and drops
// size-1 axes. Keeps rank >= 1.
template <std::size_t K>
Layout<K> collapse(Layout<K> in) {
  Layout<K> out;
  for (int i = 0; i < in.rank; ++i) {
    if (in.shape[i] == 1) continue;
    if (out.rank > 0) {
      // Contiguity across the pair: stride[prev] == stride[cur] * size[cur] for all operands.
      bool merge = true;
      for (std::size_t k = 0; k < K; ++k)
        if (out.strides[k][out.rank - 1] != in.strides[k][i] * in.shape[i]) merge = false;
      if (merge) {
        out.shape[out.rank - 1] *= in.shape[i];
        for (std::size_t k = 0; k < K; ++k) out.strides[k][out.rank - 1] = in.strides[k][i];
        continue;
      }
    }
    out.shape[out.rank] = in.shape[i];
    for (std::size_t k = 0; k < K; ++k) out.strides[k][out.rank] = in.strides[k][i];
    ++out.rank;
  }
  if (out.rank == 0) {
    out.rank = 1;
    out.shape[0] = 1;
    for (std::size_t k = 0; k < K; ++k) out.strides[k][0] = 1;
  }
  return out;
}

// Visits rows [0, n_rows) of `l` (all axes but the last): fn(offsets, row_len) where
// offsets[k] is operand k's element offset of the row's first element.
template <std::size_t K, class F>
void for_each_row(ThreadPool* pool, const Layout<K>& l, F&& fn) {
  const int outer = l.rank - 1;
  const std::int64_t len = l.shape[l.rank - 1];
  std::int64_t rows = 1;
  for (int i = 0; i < outer; ++i) rows *= l.shape[i];
  auto run = [&](std::int64_t begin, std::int64_t end) {
    Dims idx{};
    std::array<std::int64_t, K> off{};
    std::int64_t r = begin;
    for (int i = outer - 1; i >= 0; --i) {
      idx[i] = r % l.shape[i];
      r /= l.shape[i];
    }
    for (std::size_t k = 0; k < K; ++k)
      for (int i = 0; i < outer; ++i) off[k] += idx[i] * l.strides[k][i];
    for (std::int64_t row = begin; row < end; ++row) {
      fn(off, len);
      for (int i = outer - 1; i >= 0; --i) {  // odometer increment
        ++idx[i];
        for (std::size_t k = 0; k < K; ++k) off[k] += l.strides[k][i];
        if (idx[i] < l.shape[i]) break;
        for (std::size_t k = 0; k < K; ++k) off[k] -= l.strides[k][i] * l.shape[i];
        idx[i] = 0;
      }
    }
  };
  constexpr std::int64_t kSerialElems = 1 << 15;
  if (pool == nullptr || pool->size() == 1 || rows == 1 || rows * len < kSerialElems) {
    run(0, rows);
    return;
  }
  const std::int64_t grain = std::max<std::int64_t>(1, (1 << 14) / std::max<std::int64_t>(len, 1));
  pool->parallel_range(rows, grain, run);
}

}  // namespace fucina::raw
