#pragma once
// Matrix products with ggml block-quantized weights, as llama.cpp's CPU backend does them:
// each activation row is quantized to the int8 block format the weight type pairs with
// (Q8_0 / Q8_1 / Q8_K), then every output is one integer-accumulating dot kernel over the
// weight row (quant/vec_dot.hpp). The weights are never dequantized.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

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

// The activation rows of one left operand encoded for the packed kernels, kept across the
// products that read it (q/k/v, gate/up: SharedInput) so each activation format is encoded
// once rather than once per product. Encoding is per row, so a product over rows [r0, r0+n)
// reads the same bytes it would have encoded itself.
class PackedActivations {
 public:
  // x's n_rows rows (of `cols`) in the packed activation format of weights of `type`,
  // encoded on the first request for that format (and again if x moved: keyed by address,
  // so the caller keeps x's rows unchanged while it holds this).
  const std::byte* rows(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t cols, quant::QuantType type);

 private:
  struct Encoded {
    quant::QuantType act_type;  // the weight type's vec_dot_type: one packed format each
    std::vector<std::byte> bytes;
  };
  const float* x_ = nullptr;
  std::vector<Encoded> encoded_;
};

// y[r * n_out + o] = dot(w row o, x row r) for r < n_rows, o < w.rows (x rows of w.cols).
// acts: x's encodings shared with other products of the same x (or null).
void matmul_quant(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y,
                  PackedActivations* acts = nullptr);

// Rows `ids` of w decoded to f32 (embedding lookup): out[i * w.cols + j].
void gather_quant_rows(const QuantMatrix& w, const std::int32_t* ids, std::int64_t n, float* out);

}  // namespace fucina::model
