#pragma once
// y = x · Wᵀ with W stored as f16 or f32 rows read in place, x in f32, each output summed
// in the exact order llama.cpp's CPU backend sums it.
//
// Note [f16 activations]: llama.cpp's CPU backend multiplies an f16 weight by an f16
// copy of the activations (ggml's vec_dot_type for F16 is F16), products summed in f32.
// round_to_f16() reproduces that rounding; the kernels then take exact f16 values in f32.
//
// Note [ggml summation order]: an f32 sum that differs by one ulp can flip the next f16
// rounding (f16 activations, the f16 KV cache), and a few flips move logits by ~1e-3; the
// flips grow with the prompt (on f32-weight models summed in another order, 2e-4 at 20
// tokens, 9e-4 at 40). So the sums follow ggml's two orders exactly (x86, 16 lanes, FMA;
// the lanes fold like GCC's _mm512_reduce_add_ps), for f16 and f32 weights alike:
// `tiled` = llamafile's tinyBLAS (one 16-lane accumulator over k, used by mul_mat for >= 2
// rows when k % 16 == 0 and rows % 4 == 0); `vec` = ggml_vec_dot_f16 / ggml_vec_dot_f32
// (four accumulators over 64-blocks, folded 0+2, 1+3, 0+1; the tail summed in double for
// f16, in f32 with FMA for f32; used for one row and by mul_mat_id, i.e. MoE experts). The
// scalar twins emulate the lanes bit for bit.
#include <cstdint>

#include "fucina/core/half.hpp"
#include "fucina/core/thread_pool.hpp"

namespace fucina::model {

enum class GgmlOrder { tiled, vec };

// x[i] <- f32(f16(x[i])), round to nearest even.
void round_to_f16(float* x, std::int64_t n);
// dst[i] = f32(f16(src[i])) for n elements, split over the pool for big inputs (prompts).
void round_to_f16(ThreadPool& pool, const float* src, float* dst, std::int64_t n);

// dot(w[0..k), x[0..k)) with w in f16 / f32; the SIMD arm when compiled in, else the scalar one.
float dot_f16(const Half* w, const float* x, std::int64_t k, GgmlOrder order);
float dot_f16_scalar(const Half* w, const float* x, std::int64_t k, GgmlOrder order);
float dot_f32(const float* w, const float* x, std::int64_t k, GgmlOrder order);
float dot_f32_scalar(const float* w, const float* x, std::int64_t k, GgmlOrder order);
// out[q][j] = dot_f16(w + j * w_stride, x[q], k, vec) for j < n, q < n_x, bit for bit; rows
// are folded 16 at a time, and each row is widened once for several queries (attention
// scores of the query heads, and of the rows of one sequence, that share a KV head): up to
// 4 at a time for k = 64, 2 otherwise.
inline constexpr int kMaxVecRowQueries = 8;
void dot_f16_vec_rows(const Half* w, std::int64_t w_stride, const float* const* x, int n_x, std::int64_t k, std::int64_t n,
                      float* const* out);

// y[r * n_out + o] = dot(w row o, x row r) for r < n_rows, o < n_out. Rows of w are
// w_stride elements apart; x is contiguous [n_rows, k]. Parallel over o.
void matmul_f16(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const Half* w,
                std::int64_t w_stride, std::int64_t n_out, float* y, GgmlOrder order);
void matmul_f32(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const float* w,
                std::int64_t w_stride, std::int64_t n_out, float* y, GgmlOrder order);

// BF16 weights (stored bf16 bits): the activations are rounded to bf16 as ggml does and
// every product is vdpbf16ps's (pairs of exact products added one FMA at a time, subnormals
// flushed), in ggml_vec_dot_bf16's order for one row (two accumulators over 64-blocks, the
// tail in double) or tinyBLAS's for >= 2 rows (k % 32 == 0, n_out % 4 == 0) unless one_row
// (Note [One-row arithmetic]). The scalar twin emulates the instruction bit for bit.
float dot_bf16(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k, GgmlOrder order);
float dot_bf16_scalar(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k, GgmlOrder order);
void matmul_bf16(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const std::uint16_t* w,
                 std::int64_t w_stride, std::int64_t n_out, float* y, bool one_row = false);

}  // namespace fucina::model
