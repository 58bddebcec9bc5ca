#pragma once
// Untagged reductions and row-wise normalisations along one axis.
#include <cstdint>
#include <span>

#include "fucina/core/context.hpp"
#include "fucina/core/raw_tensor.hpp"

namespace fucina::raw {

enum class ReduceOp { sum, mean, max, min, logsumexp };

// out has x's shape without `axis` (f32).
void reduce(Context& ctx, ReduceOp op, const RawTensor& x, int axis, RawTensor& out);
// out (i32) has x's shape without `axis`; ties resolve to the lowest index.
void argmax(Context& ctx, const RawTensor& x, int axis, RawTensor& out);
// values (f32) / indices (i32) have x's shape with `axis` of size k; sorted descending,
// ties by lower index first.
void topk(Context& ctx, const RawTensor& x, int axis, std::int64_t k, RawTensor& values, RawTensor& indices);

// Along `axis`, out has x's shape.
void softmax(Context& ctx, const RawTensor& x, int axis, RawTensor& out, bool log_space);
void rms_norm(Context& ctx, const RawTensor& x, int axis, float eps, RawTensor& out);
void layer_norm(Context& ctx, const RawTensor& x, int axis, float eps, RawTensor& out);

// How rope rounds a rotated pair (x0, x1) by (cos, sin): `separate` rounds each product
// (x0·c − x1·s, as torch computes it); `ggml` fuses the first product of each output into
// one FMA, as GCC contracts ggml's rope, for bit parity with llama.cpp (a one-ulp f32
// difference can flip a later f16 rounding and move logits by ~1e-3).
enum class RopeRounding { separate, ggml };

// Rotary embedding: pairs along `dim_axis` rotated by positions[p] * base^(-2i/d) where p
// is the index along `pos_axis`; the angles by repeated f32 multiplication, as ggml forms
// them. neox pairs (i, i+d/2), otherwise (2i, 2i+1), as llama.cpp.
void rope(Context& ctx, const RawTensor& x, int pos_axis, int dim_axis, std::span<const std::int32_t> positions,
          float base, bool neox, RopeRounding rounding, RawTensor& out);


}  // namespace fucina::raw
