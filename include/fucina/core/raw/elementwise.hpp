#pragma once
// Untagged pointwise kernels. Operands arrive already aligned to the output's shape
// (broadcast axes carry stride 0); the tagged layer does that alignment by name.
#include "fucina/core/context.hpp"
#include "fucina/core/raw_tensor.hpp"

namespace fucina::raw {

enum class UnaryOp {
  exp, log, tanh, sigmoid, silu, gelu, relu, sqrt, rsqrt, neg, abs, square,
  pow,         // x^p0
  clamp,       // min(max(x, p0), p1)
  add_scalar,  // x + p0
  mul_scalar,  // x * p0
  step,        // x > 0 ? 1 : 0 (relu's derivative)
};
enum class BinaryOp { add, sub, mul, div, maximum, minimum, pow };

std::string_view to_string(UnaryOp op);
std::string_view to_string(BinaryOp op);

void unary(Context& ctx, UnaryOp op, const RawTensor& x, RawTensor& out, float p0 = 0.f, float p1 = 0.f);
void binary(Context& ctx, BinaryOp op, const RawTensor& a, const RawTensor& b, RawTensor& out);
// out = cond != 0 ? a : b, all f32 and aligned to out.
void where(Context& ctx, const RawTensor& cond, const RawTensor& a, const RawTensor& b, RawTensor& out);
// Element-wise copy with dtype conversion (f32/f16/bf16/i32); shapes must agree.
void copy(Context& ctx, const RawTensor& src, RawTensor& dst);
void fill(Context& ctx, RawTensor& dst, float value);
// n f32 values to f16, nearest even: copy's conversion (a KV-cache store), one run.
void f32_to_f16_run(const float* s, Half* d, std::int64_t n);

// Scalar-only twins (the portable reference path), for parity tests of the SIMD arms.
void unary_reference(UnaryOp op, const float* x, float* y, std::int64_t n, float p0 = 0.f, float p1 = 0.f);
void binary_reference(BinaryOp op, const float* a, const float* b, float* y, std::int64_t n);
// The SIMD arm on contiguous rows (equals the reference where no SIMD is compiled).
void unary_contiguous(UnaryOp op, const float* x, float* y, std::int64_t n, float p0 = 0.f, float p1 = 0.f);
void binary_contiguous(BinaryOp op, const float* a, const float* b, float* y, std::int64_t n);

}  // namespace fucina::raw
