#pragma once
// Activation checkpointing: run a block without recording, keep only its input, and
// recompute it (recording) inside backward. Kernels are deterministic, so gradients are
// bit-identical to the plain run when the block's input and parameters are used only
// inside the block.
#include <functional>

#include "fucina/core/tensor.hpp"

namespace fucina {

namespace autograd {
class CheckpointNode final : public OpNode {
 public:
  using Recompute = std::function<void(Context&, const RawTensor& gy, RawTensor& gx)>;
  explicit CheckpointNode(Recompute fn) : fn_(std::move(fn)) {}
  const char* name() const override { return "checkpoint"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override {
    RawTensor gx;
    fn_(ctx, gy, gx);
    if (inputs_[0]) grads[0] = std::move(gx);
  }
  void release_saved() override { fn_ = nullptr; }

 private:
  Recompute fn_;
};
}  // namespace autograd

// y = fn(ctx, x) without keeping fn's intermediates; parameters captured by fn receive
// their gradients when backward recomputes the block.
template <class F, FloatTensor X>
auto checkpoint(Context& ctx, F fn, const X& x) {
  using Y = decltype(fn(ctx, x));
  Y y;
  {
    autograd::NoGradGuard no_grad;
    y = fn(ctx, x.detach());
  }
  if (!autograd::grad_enabled()) return y;
  RawTensor xr = x.raw();
  const bool x_grad = x.requires_grad();
  auto recompute = [fn, xr, x_grad](Context& c, const RawTensor& gy, RawTensor& gx) {
    autograd::EnableGradGuard enable;
    X xv(xr);
    if (x_grad) xv = xv.variable();
    Y yy = fn(c, xv);
    if (!yy.requires_grad()) return;
    autograd::run_backward(c, yy.node(), gy);
    if (x_grad) gx = xv.grad().raw();
  };
  y.set_node(autograd::make_node<autograd::CheckpointNode>({x.node()}, std::move(recompute)));
  return y;
}

}  // namespace fucina
