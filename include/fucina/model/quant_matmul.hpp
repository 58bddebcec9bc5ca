#pragma once
// Matrix products with ggml block-quantized weights, as llama.cpp's CPU backend does them:
// each activation row is quantized to the int8 block format the weight type pairs with
// (Q8_0 / Q8_1 / Q8_K), then every output is one integer-accumulating dot kernel over the
// weight row (quant/vec_dot.hpp). The weights are never dequantized.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fucina/core/buffer.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::model {

// A [rows, cols] matrix of quantized rows, borrowed (the BufferRef keeps the mmap alive).
struct QuantMatrix {
  BufferRef owner;
  const std::byte* data = nullptr;
  quant::QuantType type = quant::QuantType::Q8_0;
  std::int64_t rows = 0, cols = 0, row_bytes = 0;
  bool fast_prefill = false;  // many-row products through the f32 GEMM (Note [Quantized GEMM])
  // The same rows interleaved for the VNNI kernels (quant/packed.hpp); products use it
  // when set, gathers (embedding lookups) still read `data`.
  std::shared_ptr<const quant::PackedMatrix> packed;

  const std::byte* row(std::int64_t r) const { return data + r * row_bytes; }
};

// y[r * n_out + o] = dot(w row o, x row r) for r < n_rows, o < w.rows (x rows of w.cols).
void matmul_quant(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y);

// Rows `ids` of w decoded to f32 (embedding lookup): out[i * w.cols + j].
void gather_quant_rows(const QuantMatrix& w, const std::int32_t* ids, std::int64_t n, float* out);

}  // namespace fucina::model
