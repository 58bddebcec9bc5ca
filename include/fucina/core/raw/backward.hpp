#pragma once
// Untagged kernels used only by backward passes (and the fused cross-entropy loss).
#include <cstdint>
#include <span>

#include "fucina/core/context.hpp"
#include "fucina/core/raw/elementwise.hpp"
#include "fucina/core/raw/reduce.hpp"

namespace fucina::raw {

// gx = gy * f'(x) for the unary op (y = f(x) is given for ops whose derivative uses it).
void unary_backward(Context& ctx, UnaryOp op, const RawTensor& x, const RawTensor& y, const RawTensor& gy,
                    RawTensor& gx, float p0, float p1);
// Along axis: softmax (y = softmax) or log_softmax (y = log_softmax).
void softmax_backward(Context& ctx, const RawTensor& y, const RawTensor& gy, int axis, bool log_space, RawTensor& gx);
void rms_norm_backward(Context& ctx, const RawTensor& x, const RawTensor& gy, int axis, float eps, RawTensor& gx);
void layer_norm_backward(Context& ctx, const RawTensor& x, const RawTensor& gy, int axis, float eps, RawTensor& gx);
// max/min along axis: the gradient is split evenly among tied extrema. y has x's shape
// without the axis; gy likewise.
void extremum_backward(Context& ctx, const RawTensor& x, const RawTensor& y, const RawTensor& gy, int axis, RawTensor& gx);
// Scatters gy (indices' shape) into gx (x's shape, zeroed here) at indices along axis.
void scatter_backward(Context& ctx, const RawTensor& indices, const RawTensor& gy, int axis, RawTensor& gx);

// Mean cross-entropy over rows of logits [rows, classes] (axis = class axis) with i32
// targets [rows]; rows whose target == ignore_index do not count. Returns the loss and
// writes d loss / d logits into grad (if grad.buf) scaled by 1/count.
float cross_entropy(Context& ctx, const RawTensor& logits, int class_axis, const RawTensor& targets,
                    std::int32_t ignore_index, RawTensor* grad);

// Sums the axes of g that `map` does not name, then views the rest in operand order:
// operand axis i is g's axis map[i].
RawTensor reduce_to(Context& ctx, const RawTensor& g, int op_rank, const std::array<int, kMaxRank>& map);

}  // namespace fucina::raw
