#pragma once
// Note [One-row arithmetic]: speculative verification (generate/speculator.hpp) runs a
// token and the k tokens drafted after it in one forward of k+1 rows, and must get for
// each row exactly the logits (and K/V) that decoding it alone, one forward() per token,
// would give -- else greedy output could differ from plain decoding at a near tie, and the
// cached K/V would drift from plain decoding's for the rest of the text. A many-row forward
// sums otherwise: f32/f16/bf16 products take tinyBLAS tiles from 2 rows (Note [ggml
// summation order]), quantized ones the f32 GEMM from 16 rows (Note [Quantized GEMM]), and
// attention the unsplit kernel (Note [split decode]). While a OneRowArithmetic scope lives
// on the calling thread, every product sums each row in its one-row order (each weight row
// is still read once for all rows: the products stay memory-bound) and attention runs each
// new row alone over the keys up to it, with the kernel a one-row forward picks.
namespace fucina::model {

// Whether a OneRowArithmetic scope is alive on this thread.
bool one_row_arithmetic() noexcept;

class OneRowArithmetic {
 public:
  OneRowArithmetic() noexcept;
  ~OneRowArithmetic();
  OneRowArithmetic(const OneRowArithmetic&) = delete;
  OneRowArithmetic& operator=(const OneRowArithmetic&) = delete;
};

}  // namespace fucina::model
