#pragma once
// Note [One-row arithmetic]: speculative verification (generate/speculator.hpp) runs a
// token and the k tokens drafted after it in one forward of k+1 rows, and must get for
// each row exactly the logits (and K/V) that decoding it alone, one forward() per token,
// would give -- else greedy output could differ from plain decoding at a near tie, and the
// cached K/V would drift from plain decoding's for the rest of the text. A many-row forward
// sums otherwise: f32/f16/bf16 products take tinyBLAS tiles from 2 rows (Note [ggml
// summation order]), quantized ones the f32 GEMM from 16 rows (Note [Quantized GEMM]), and
// attention the unsplit kernel (Note [split decode]). While a OneRowArithmetic scope lives
// on the calling thread, the products and attention sum each of the forward's first `rows`
// rows in its one-row order (each weight row is still read once for all of them: the
// products stay memory-bound), and attention runs each such row alone over the keys up to
// it, with the kernel a one-row forward picks. The rows after them -- a batch's prompt
// chunks (Note [Speculative batches]) -- sum as they would in a forward of their own, so one
// forward serves both without reading the weights twice from DRAM.
#include <algorithm>
#include <cstdint>
#include <limits>

namespace fucina::model {

inline constexpr std::int64_t kAllRows = std::numeric_limits<std::int64_t>::max();

// How many leading rows of the forward under way on this thread are in one-row
// arithmetic: 0 outside a OneRowArithmetic scope.
std::int64_t one_row_rows() noexcept;

class OneRowArithmetic {
 public:
  explicit OneRowArithmetic(std::int64_t rows = kAllRows) noexcept;
  ~OneRowArithmetic();
  OneRowArithmetic(const OneRowArithmetic&) = delete;
  OneRowArithmetic& operator=(const OneRowArithmetic&) = delete;

 private:
  std::int64_t outer_;
};

// A product over n_rows rows in the arithmetic each row is due: fn(first_row, rows,
// one_row) for the leading one-row rows, then for the others, each part as a product of
// its own (so the others choose their order by their own count, as in a forward of their own).
template <class Fn>
void by_row_arithmetic(std::int64_t n_rows, Fn&& fn) {
  const std::int64_t one = std::min(one_row_rows(), n_rows);
  if (one > 0) fn(std::int64_t{0}, one, true);
  if (one < n_rows) fn(one, n_rows - one, false);
}

}  // namespace fucina::model
