#include "fucina/model/quant_matmul.hpp"

#include <cmath>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"
#include "fucina/model/f16_matmul.hpp"
#include "fucina/model/one_row.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/vec_dot.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

// From this many activation rows a fast_prefill product goes through the blocked f32 GEMM
// on decoded weights: decoding a weight row costs about one int8 dot, and the GEMM's
// register tiling then beats M separate dots.
constexpr std::int64_t kGemmFromRows = 16;

// How far ahead of the row being multiplied a one-row product prefetches. Measured on
// Qwen3-0.6B decode, 2 threads (tg64 tokens/s, noisy): Q4_K_M 40.5 without, 48-51 at 2 KiB,
// 42 at 4 KiB; Q8_0 36 without, 40-44 at 2 KiB.
constexpr std::int64_t kPrefetchBytes = 2048;

void decode_rows(const void* self, std::int64_t j0, std::int64_t nj, std::int64_t p0, std::int64_t kb, float* dst) {
  const auto& w = *static_cast<const QuantMatrix*>(self);
  const std::int64_t offset = quant::row_bytes(w.type, p0);
  for (std::int64_t j = 0; j < nj; ++j) quant::dequantize_row(w.type, w.row(j0 + j) + offset, dst + j * kb, kb);
}

// Note [Quantized GEMM]: llama.cpp quantizes the activations to the paired int8 format and
// sums integer products per block. Decoding both sides to f32 gives the same values
// exactly (d·q products of an f16/f32 scale and a small integer are exact in f32), so
// this path differs from the int8 one only in f32 summation order -- and, for the Q8_1
// pairings (Q4_1, Q5_1), in ggml's block sum term, which it keeps rounded to f16. Those
// last-bit differences flip later int8/f16 roundings, and on random-weight models with
// near-tied logits that costs 1-7 of 128 teacher-forced top-1 matches against llama.cpp
// (the int8 path: 0-1). So it is opt-in (`--fast-prefill`, LoadOptions::fast_prefill):
// parity first, speed second. Except Q4_0: llama.cpp itself multiplies Q4_0 prompts on x86
// with a repacked 8x8 int8 GEMM (not its vec_dot order), and measured against it this path
// keeps every parity bar (teacher-forced top-1 128/128 on the 256-wide model vs 127/128 for
// the int8 path; mean KL <= 5.2e-5) at ~1.7x the int8 path's prompt speed.
// Each row of x in the paired int8 format, [n_rows][row_bytes(act_type, k)].
std::vector<std::byte> quantize_activations(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k,
                                            quant::QuantType act_type) {
  const std::int64_t act_bytes = quant::row_bytes(act_type, k);
  std::vector<std::byte> act(static_cast<std::size_t>(act_bytes * n_rows));
  pool.parallel_for(n_rows, [&](std::int64_t r) {
    quant::quantize_row_activation(act_type, x + r * k, act.data() + r * act_bytes, k);
  });
  return act;
}

// y = xq · decoded(w)ᵀ through the blocked f32 GEMM (xq: f32 rows of w.cols).
void gemm_decoded(ThreadPool& pool, const float* xq, std::int64_t n_rows, const QuantMatrix& w, float* y,
                  std::int64_t k_align) {
  kernels::GemmArgs g{.m = n_rows, .n = w.rows, .k = w.cols, .a = xq, .a_rs = w.cols, .c = y, .c_rs = w.rows};
  kernels::sgemm_rows(g, {.rows = decode_rows, .self = &w, .k_align = k_align}, &pool);
}

void matmul_quant_gemm(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y,
                       quant::QuantType act_type) {
  const std::int64_t k = w.cols;
  const std::int64_t act_bytes = quant::row_bytes(act_type, k);
  const auto act = quantize_activations(pool, x, n_rows, k, act_type);
  std::vector<float> xq(static_cast<std::size_t>(n_rows * k));
  pool.parallel_for(n_rows, [&](std::int64_t r) {
    quant::dequantize_row(act_type, act.data() + r * act_bytes, xq.data() + r * k, k);
  });
  gemm_decoded(pool, xq.data(), n_rows, w, y, quant::codec_traits(w.type).block_size);
}

// x's rows in the packed activation format of `type`, one pool task per row.
std::vector<std::byte> encode_packed(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k,
                                     quant::QuantType type) {
  const std::int64_t act_bytes = quant::packed_act_bytes(type, k);
  std::vector<std::byte> act(static_cast<std::size_t>(act_bytes * n_rows));
  pool.parallel_for(n_rows, [&](std::int64_t r) {
    quant::quantize_packed_act(type, x + r * k, act.data() + r * act_bytes, k);
  });
  return act;
}

// Packed weights (quant/packed.hpp): activations in the packed kernels' format, then
// groups of 16 output rows spread over the pool; each task covers every activation row.
// `act`: the rows already encoded (PackedActivations), or null to encode them here.
void matmul_packed(ThreadPool& pool, const float* x, std::int64_t n_rows, const quant::PackedMatrix& w, float* y,
                   const std::byte* act) {
  std::vector<std::byte> own;
  if (act == nullptr) {
    own = encode_packed(pool, x, n_rows, w.cols(), w.type());
    act = own.data();
  }
  const quant::PackedKernel fn = quant::packed_kernel(quant::DotArm::Avx512Vnni, w.type());
  FUCINA_ASSERT(fn != nullptr);
  // Chunks of at least 32 KiB of weights (smaller ones cost more in claiming than they
  // balance), shrinking towards the end so both threads stream until the product is done:
  // decode runs ~200 of these per token, and a thread idle at each join leaves bandwidth
  // unused (+0.5-6% decode over 8 equal tasks per thread, in-process A/B).
  pool.parallel_guided(w.groups(), (32768 + w.group_bytes() - 1) / w.group_bytes(), [&](std::int64_t g0, std::int64_t g1) {
    fn(w, g0, g1, act, n_rows, y, w.rows());
  });
}

// n_rows rows in one arithmetic: with one_row, each row summed as a one-row product would
// sum it (Note [One-row arithmetic]).
// acts (or null): the encodings of every row of the operand x + r0 * w.cols belongs to.
void matmul_quant_rows(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y,
                       bool one_row, PackedActivations* acts, const float* x_all, std::int64_t n_all, std::int64_t r0) {
  if (w.type == quant::QuantType::BF16)
    return matmul_bf16(pool, x, n_rows, w.cols, reinterpret_cast<const std::uint16_t*>(w.row(0)),
                       static_cast<std::int64_t>(w.row_bytes / sizeof(std::uint16_t)), w.rows, y, one_row);
  const auto& traits = quant::codec_traits(w.type);
  const quant::QuantType act_type = traits.vec_dot_type;
  const bool gemm = n_rows >= kGemmFromRows && !one_row;
  if (w.fast_prefill && gemm) return matmul_quant_gemm(pool, x, n_rows, w, y, act_type);
  if (w.packed != nullptr) {
    const std::byte* act = nullptr;
    if (acts != nullptr)
      act = acts->rows(pool, x_all, n_all, w.cols, w.type) + r0 * quant::packed_act_bytes(w.type, w.cols);
    return matmul_packed(pool, x, n_rows, *w.packed, y, act);
  }
  if (w.type == quant::QuantType::Q4_0 && gemm) return matmul_quant_gemm(pool, x, n_rows, w, y, act_type);
  const std::int64_t k = w.cols;
  const std::int64_t act_bytes = quant::row_bytes(act_type, k);
  const auto act = quantize_activations(pool, x, n_rows, k, act_type);
  const quant::DotFn dot = quant::dot_kernel(quant::best_dot_arm(), w.type);
  FUCINA_CHECK(dot != nullptr, Unsupported, "[matmul] no dot kernel for {}", traits.name);
  // Tasks are blocks of output rows; each task covers every input row (weights stream once).
  constexpr std::int64_t kRowsPerTask = 16;
  const std::int64_t tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  const quant::DotRowsFn rows = n_rows > 1 ? quant::dot_rows_kernel(w.type) : nullptr;
  pool.parallel_for(tasks, [&](std::int64_t t) {
    const std::int64_t o0 = t * kRowsPerTask, o1 = std::min(w.rows, o0 + kRowsPerTask);
    std::int64_t r = 0;
    if (rows != nullptr) {  // groups of activation rows share each weight row's unpacking
      for (; r < n_rows; r += quant::kMaxDotRows) {
        const int rm = static_cast<int>(std::min<std::int64_t>(quant::kMaxDotRows, n_rows - r));
        const void* acts[quant::kMaxDotRows];
        for (int i = 0; i < rm; ++i) acts[i] = act.data() + (r + i) * act_bytes;
        float out[quant::kMaxDotRows];
        for (std::int64_t o = o0; o < o1; ++o) {
          rows(k, w.row(o), acts, rm, out);
          for (int i = 0; i < rm; ++i) y[(r + i) * w.rows + o] = out[i];
        }
      }
    }
    for (; r < n_rows; ++r) {
      const std::byte* a = act.data() + r * act_bytes;
      for (std::int64_t o = o0; o < o1; ++o) {
        // Decode streams weights from DRAM: request the bytes kPrefetchBytes ahead of this row.
        const std::byte* ahead = w.row(o) + kPrefetchBytes;
        if (ahead + w.row_bytes <= w.data + w.rows * w.row_bytes)
          for (std::int64_t b = 0; b < w.row_bytes; b += 64) __builtin_prefetch(ahead + b, 0, 0);
        y[r * w.rows + o] = dot(k, w.row(o), a);
      }
    }
  });
}

}  // namespace

const std::byte* PackedActivations::rows(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t cols,
                                         quant::QuantType type) {
  if (x != x_) encoded_.clear();  // another operand: nothing kept applies
  x_ = x;
  const quant::QuantType act_type = quant::codec_traits(type).vec_dot_type;
  for (const Encoded& e : encoded_)
    if (e.act_type == act_type) return e.bytes.data();
  encoded_.push_back({act_type, encode_packed(pool, x, n_rows, cols, type)});
  return encoded_.back().bytes.data();
}

void matmul_quant(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y,
                  PackedActivations* acts) {
  by_row_arithmetic(n_rows, [&](std::int64_t r0, std::int64_t rows, bool one_row) {
    matmul_quant_rows(pool, x + r0 * w.cols, rows, w, y + r0 * w.rows, one_row, acts, x, n_rows, r0);
  });
}

void gather_quant_rows(const QuantMatrix& w, const std::int32_t* ids, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    FUCINA_CHECK(ids[i] >= 0 && ids[i] < w.rows, IndexOutOfBounds, "[embed] token id {} is outside 0..{}", ids[i],
                 w.rows - 1);
    quant::dequantize_row(w.type, w.row(ids[i]), out + i * w.cols, w.cols);
  }
}

}  // namespace fucina::model
