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
// rms_norm then out *= w along `axis` (w: x.shape[axis] contiguous floats, or null for none),
// in one pass with the two ops' roundings.
void rms_norm_mul(Context& ctx, const RawTensor& x, int axis, const float* w, float eps, RawTensor& out);
void layer_norm(Context& ctx, const RawTensor& x, int axis, float eps, RawTensor& out);

// Rotary embedding: pairs along `dim_axis` rotated by positions[p] * base^(-2i/d) where p
// is the index along `pos_axis`. neox pairs (i, i+d/2), otherwise (2i, 2i+1), as llama.cpp.
// Note [Rope arithmetic]: ggml's, for bit parity with llama.cpp (a one-ulp f32 difference
// can flip a later f16 rounding and move logits by ~1e-3): angles by repeated f32
// multiplication; each output x0·c − x1·s, x0·s + x1·c with its first product fused (one
// FMA, as GCC contracts ggml's C). The FMA is written out: GCC 12 fused the plain
// expression for adjacent pairs anyway (-ffp-contract=off notwithstanding) but not for neox
// pairs, so the plain form gave one rounding per mode and another per compiler.
void rope(Context& ctx, const RawTensor& x, int pos_axis, int dim_axis, std::span<const std::int32_t> positions,
          float base, bool neox, RawTensor& out);


}  // namespace fucina::raw
