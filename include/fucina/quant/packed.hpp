#pragma once
// Quantized weights repacked at load into 16-row interleaved groups for VNNI matrix products.
//
// Note [Interleaved weights]: a group holds weight rows 16g..16g+15 (rows past the end are
// zero). Within one block (32 elements; for K formats one sub-block pair or sub-block), the
// quants are stored as 64-byte chunks whose 4-byte lane r holds 4 consecutive elements of
// row r, as unsigned bytes. One `vpdpbusd` of a chunk against 4 activation bytes broadcast
// to every lane then adds 4 products to each of the 16 rows' int32 dots at once: no
// horizontal sums, and the per-row f16 scales of a block sit together as one vector. The
// unsigned weight offset (128 for Q8_0, 8 for Q4_0, 32 for Q6_K) is removed through the
// activation block sums. The same layout serves decode (one activation row) and prompts
// (several rows share each unpacked chunk).
//
// Note [Packed determinism]: integer dots are exact, and the float side has one fixed order
// per format (for Q8_0/Q4_0: acc = fma((float)isum_b, d_w * d_a, acc), block after block), which
// the scalar arm and the AVX512-VNNI arm both follow, so they return bit-identical floats. It
// is not the order of the one-row dot kernels (Note [Dot determinism]) nor ggml's; the
// difference is a few f32 ulps of each output (tested against the one-row kernels).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fucina/core/thread_pool.hpp"
#include "fucina/quant/traits.hpp"
#include "fucina/quant/vec_dot.hpp"

namespace fucina::quant {

inline constexpr int kPackRows = 16;

// Memory for packed matrices: 2 MiB-aligned regions advised as transparent huge pages
// (Note [Huge pages]: decode streams every weight byte per token; 4 KiB pages add TLB misses
// and measured slower and less steady), carved 64-byte aligned so the many small matrices of a model
// share regions instead of each rounding up to 2 MiB. Regions live while a matrix uses them.
class PackedArena {
 public:
  std::shared_ptr<std::byte> allocate(std::size_t bytes);

 private:
  std::shared_ptr<std::byte> region_;
  std::size_t used_ = 0, size_ = 0;
};

// A weight matrix [rows, cols] in interleaved groups of kPackRows rows, 64-byte aligned.
class PackedMatrix {
 public:
  // Storage from `arena` when given, else its own allocation.
  PackedMatrix(QuantType type, std::int64_t rows, std::int64_t cols, PackedArena* arena = nullptr);
  QuantType type() const { return type_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t groups() const { return (rows_ + kPackRows - 1) / kPackRows; }
  std::int64_t group_bytes() const { return group_bytes_; }
  std::int64_t bytes() const { return groups() * group_bytes_; }
  const std::byte* group(std::int64_t g) const { return data_.get() + g * group_bytes_; }
  std::byte* mutable_group(std::int64_t g) { return data_.get() + g * group_bytes_; }

 private:
  QuantType type_;
  std::int64_t rows_, cols_, group_bytes_;
  std::shared_ptr<std::byte> data_;
};

// Whether `type` has packed kernels (Q8_0, Q4_0, Q4_K, Q6_K) and cols suits them.
bool packable(QuantType type, std::int64_t cols);

// Repacks `rows` ggml rows of `row_bytes` each (row r at data + r * row_bytes).
// Throws Unsupported when !packable(type, cols).
PackedMatrix pack_matrix(QuantType type, const std::byte* data, std::int64_t rows, std::int64_t cols,
                         std::int64_t row_bytes, ThreadPool* pool = nullptr, PackedArena* arena = nullptr);

// The activation row format the packed kernels read for weights of `type`: for the
// Q8_0-paired formats ggml's Q8_0 quantization with each block's scale as f32 and its
// int8 sum; for K formats ggml's Q8_K block as is.
std::int64_t packed_act_bytes(QuantType type, std::int64_t cols);
// (The Q8_0-paired rows through an AVX-512 encoder when compiled, byte-identical to
// quantize_packed_act_scalar, its twin.)
void quantize_packed_act(QuantType type, const float* x, std::byte* dst, std::int64_t cols);
void quantize_packed_act_scalar(QuantType type, const float* x, std::byte* dst, std::int64_t cols);

// y[r * ldy + o] = dot(weight row o, activation row r) for r < n_act and o in rows
// [16 * g0, min(16 * g1, rows)): activation row r at act + r * packed_act_bytes(type, cols).
using PackedKernel = void (*)(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                              std::int64_t n_act, float* y, std::int64_t ldy);
// The kernel of `arm` (Scalar or Avx512Vnni); nullptr when that arm is not compiled.
PackedKernel packed_kernel(DotArm arm, QuantType type);
// Whether the fast arm is compiled: packing is worth it only then.
bool packed_fast_arm_compiled();

}  // namespace fucina::quant
