#pragma once
// Dot products between a quantized weight row and a quantized activation row, in the
// pairing ggml's CPU matmul uses: Q4_0/Q5_0/Q8_0/IQ4_NL x Q8_0, Q4_1/Q5_1 x Q8_1, and
// Q2_K..Q6_K/IQ4_XS/TQ1_0/TQ2_0 x Q8_K (see CodecTraits::vec_dot_type).
//
// Note [Dot determinism]: each block's integer dot is exact (int32), and the float part is
// fixed: block b contributes c_b = (float)isum * (d_w * d_a) (formats with mins subtract
// their term), c_b is added to partial sum b % 8, and the eight partials reduce as
// ((p0+p4)+(p2+p6)) + ((p1+p5)+(p3+p7)). Every arm (scalar, AVX2, AVX512-VNNI) follows this
// order, so all arms return bit-identical floats. ggml orders its float sums differently
// (and uses FMA), so agreement with ggml is close but not bitwise. Activation int8 values
// must lie in [-127, 127] (true of every activation encoder here): the SIMD sign trick
// cannot negate -128.
#include <cstdint>

#include "fucina/quant/traits.hpp"

namespace fucina::quant {

enum class DotArm { Scalar, Avx2, Avx512Vnni };

// Whether an arm is compiled into this build (FUCINA_SCALAR compiles every SIMD arm out).
bool dot_arm_compiled(DotArm arm);
// The most capable compiled arm.
DotArm best_dot_arm();

using DotFn = float (*)(std::int64_t n, const void* w_row, const void* act_row);

// The kernel for weight type `type` in `arm`; nullptr when the type has no dot kernel or
// the arm is not compiled. n must be a multiple of the weight block size.
DotFn dot_kernel(DotArm arm, QuantType weight_type);

// Up to kMaxDotRows activation rows against one weight row: out[r] = dot(w, acts[r]),
// bit-identical to dot_kernel(best_dot_arm(), type) while sharing the weight-side work.
inline constexpr int kMaxDotRows = 4;
using DotRowsFn = void (*)(std::int64_t n, const void* w_row, const void* const* act_rows, int n_rows, float* out);
// The best arm's multi-row kernel for `type`; nullptr when it has none (use dot_kernel).
DotRowsFn dot_rows_kernel(QuantType weight_type);

// Checked entry point on the best arm: throws Unsupported for types without a kernel and
// InvalidArgument when n is not a whole number of blocks.
float vec_dot(QuantType weight_type, std::int64_t n, const void* w_row, const void* act_row);

// Best-arm kernels by name (unchecked: n must be a whole number of blocks).
float vec_dot_q4_0_q8_0(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q4_1_q8_1(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q5_0_q8_0(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q5_1_q8_1(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q8_0_q8_0(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_iq4_nl_q8_0(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q2_K_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q3_K_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q4_K_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q5_K_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_q6_K_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_iq4_xs_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_tq1_0_q8_K(std::int64_t n, const void* w_row, const void* act_row);
float vec_dot_tq2_0_q8_K(std::int64_t n, const void* w_row, const void* act_row);

}  // namespace fucina::quant
