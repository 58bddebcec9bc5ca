#pragma once
// The backward nodes of the model's own ops, so the inference forward is also the training
// forward (Note [One forward] in model.hpp): the weight product of every format, SwiGLU,
// causal attention over whole sequences, and the MoE router and combine.
//
// Note [Frozen weight gradient]: y = x·Wᵀ gives gx = gy·W. A frozen f16, BF16 or quantized W
// is read as stored, a block of rows at a time decoded to f32 into a scratch buffer, so no
// dequantized copy of the model exists at any time; an f32 W is read in place. The
// forward's activation rounding (f16 activations, int8 blocks for quantized weights) is a
// straight-through step: its gradient is the identity, as PyTorch's reference emulates it.
#include <span>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/model/quant_matmul.hpp"

namespace fucina::model {

// W's stored rows: dense f32/f16 [out, in] (unit column stride) or a quantized matrix.
struct WeightRows {
  RawTensor dense;
  QuantMatrix quant;
  std::int64_t rows() const { return quant.data ? quant.rows : dense.shape[0]; }
  std::int64_t cols() const { return quant.data ? quant.cols : dense.shape[1]; }
  // dst[r * cols() + c] = W[r0 + r][c] for r < n (f32).
  void decode(std::int64_t r0, std::int64_t n, float* dst) const;
};

// gx[n, in] = gy[n, out] · W (gy any strides).
RawTensor linear_input_grad(Context& ctx, const RawTensor& gy, const WeightRows& w);
// gW[out, in] = gyᵀ · x.
RawTensor linear_weight_grad(Context& ctx, const RawTensor& gy, const RawTensor& x);

// inputs {x, W or null}: x is saved only when W takes a gradient.
class LinearBackward final : public autograd::OpNode {
 public:
  LinearBackward(WeightRows w, RawTensor x) : w_(std::move(w)), x_(std::move(x)) {}
  const char* name() const override { return "linear"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { w_ = {}, x_ = {}; }

 private:
  WeightRows w_;
  RawTensor x_;
};

// inputs {gate, up}: y = silu(gate)·up, both saved.
class SwigluBackward final : public autograd::OpNode {
 public:
  SwigluBackward(RawTensor gate, RawTensor up) : gate_(std::move(gate)), up_(std::move(up)) {}
  const char* name() const override { return "swiglu"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { gate_ = up_ = {}; }

 private:
  RawTensor gate_, up_;
};

// inputs {q, k, v}: q <seq, kvh, grp, hd>, k/v <seq, kvh, hd> contiguous; rows
// [starts[i], starts[i + 1]) are sequence i. Backward recomputes the softmax per
// (sequence, head) with the f32 GEMM (nothing of size seq² is kept between passes).
class CausalAttentionBackward final : public autograd::OpNode {
 public:
  CausalAttentionBackward(RawTensor q, RawTensor k, RawTensor v, std::vector<std::int64_t> starts, float scale)
      : q_(std::move(q)), k_(std::move(k)), v_(std::move(v)), starts_(std::move(starts)), scale_(scale) {}
  const char* name() const override { return "causal_attention"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { q_ = k_ = v_ = {}; }

 private:
  RawTensor q_, k_, v_;
  std::vector<std::int64_t> starts_;
  float scale_;
};

// input {router logits <seq, expert>}: the output <seq, slot> holds the chosen experts'
// probabilities divided by their sum (Note [MoE routing] in qwen3_moe.hpp). Saves the
// probabilities, the choice and the clamped sums.
class RouterWeightsBackward final : public autograd::OpNode {
 public:
  RouterWeightsBackward(std::vector<float> probs, std::vector<std::int32_t> chosen, std::vector<float> sums,
                        std::int64_t n_expert, std::int64_t k)
      : probs_(std::move(probs)), chosen_(std::move(chosen)), sums_(std::move(sums)), n_expert_(n_expert), k_(k) {}
  const char* name() const override { return "moe_router"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;

 private:
  std::vector<float> probs_;
  std::vector<std::int32_t> chosen_;  // [token][slot]
  std::vector<float> sums_;           // [token]
  std::int64_t n_expert_, k_;
};

// inputs: one <rows, embd> output per active expert; rows[e][r] is the (token·k + slot)
// that row r of expert e's output fills. Output <seq, embd>: Σ over slots. The gradient
// of expert e's row r is gy's row of its token.
class MoeCombineBackward final : public autograd::OpNode {
 public:
  explicit MoeCombineBackward(std::vector<std::vector<std::int32_t>> rows, std::int64_t k)
      : rows_(std::move(rows)), k_(k) {}
  const char* name() const override { return "moe_combine"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;

 private:
  std::vector<std::vector<std::int32_t>> rows_;
  std::int64_t k_;
};

}  // namespace fucina::model
