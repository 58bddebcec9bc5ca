#pragma once
// The backward nodes of the core ops, one class per op family. Each saves views (buffer
// refcounts) of exactly the values its gradient formula needs; bodies are in
// src/autograd/backward_*.cpp and use only untagged kernels.
#include <array>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/core/raw/contract.hpp"
#include "fucina/core/raw/elementwise.hpp"
#include "fucina/core/raw/reduce.hpp"

namespace fucina::autograd {

using AxisMap = std::array<int, kMaxRank>;  // operand axis i is the output's axis map[i]

// out = a ∘ b with a, b aligned to out (stride 0 on broadcast axes).
class BinaryBackward final : public OpNode {
 public:
  BinaryBackward(raw::BinaryOp op, RawTensor a, RawTensor b, RawTensor out, int ra, AxisMap ma, int rb, AxisMap mb)
      : op_(op), a_(std::move(a)), b_(std::move(b)), out_(std::move(out)), ra_(ra), rb_(rb), ma_(ma), mb_(mb) {}
  const char* name() const override { return "binary"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { a_ = b_ = out_ = RawTensor{}; }

 private:
  raw::BinaryOp op_;
  RawTensor a_, b_, out_;
  int ra_, rb_;
  AxisMap ma_, mb_;
};

class UnaryBackward final : public OpNode {
 public:
  UnaryBackward(raw::UnaryOp op, RawTensor x, RawTensor y, float p0, float p1)
      : op_(op), x_(std::move(x)), y_(std::move(y)), p0_(p0), p1_(p1) {}
  const char* name() const override { return "unary"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { x_ = y_ = RawTensor{}; }

 private:
  raw::UnaryOp op_;
  RawTensor x_, y_;
  float p0_, p1_;
};

// out = where(cond, a, b), all aligned to out; cond has no gradient.
class WhereBackward final : public OpNode {
 public:
  WhereBackward(RawTensor cond, int ra, AxisMap ma, int rb, AxisMap mb)
      : cond_(std::move(cond)), ra_(ra), rb_(rb), ma_(ma), mb_(mb) {}
  const char* name() const override { return "where"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { cond_ = RawTensor{}; }

 private:
  RawTensor cond_;
  int ra_, rb_;
  AxisMap ma_, mb_;
};

// sum / mean / max / min / logsumexp over one axis.
class ReduceBackward final : public OpNode {
 public:
  ReduceBackward(raw::ReduceOp op, RawTensor x, RawTensor y, int axis)
      : op_(op), x_(std::move(x)), y_(std::move(y)), axis_(axis) {}
  const char* name() const override { return "reduce"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { x_ = y_ = RawTensor{}; }

 private:
  raw::ReduceOp op_;
  RawTensor x_, y_;
  int axis_;
};

class TopkBackward final : public OpNode {
 public:
  TopkBackward(RawTensor indices, int rank, Dims shape, int axis)
      : idx_(std::move(indices)), rank_(rank), shape_(shape), axis_(axis) {}
  const char* name() const override { return "topk"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { idx_ = RawTensor{}; }

 private:
  RawTensor idx_;
  int rank_;
  Dims shape_;
  int axis_;
};

enum class RowOp { softmax, log_softmax, rms_norm, layer_norm };

class RowBackward final : public OpNode {
 public:
  RowBackward(RowOp op, RawTensor saved, int axis, float eps) : op_(op), saved_(std::move(saved)), axis_(axis), eps_(eps) {}
  const char* name() const override { return "row_norm"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { saved_ = RawTensor{}; }

 private:
  RowOp op_;
  RawTensor saved_;  // softmax: its output; norms: their input
  int axis_;
  float eps_;
};

class RopeBackward final : public OpNode {
 public:
  RopeBackward(int pos_axis, int dim_axis, std::vector<std::int32_t> positions, float base, bool neox)
      : pos_axis_(pos_axis), dim_axis_(dim_axis), positions_(std::move(positions)), base_(base), neox_(neox) {}
  const char* name() const override { return "rope"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;

 private:
  int pos_axis_, dim_axis_;
  std::vector<std::int32_t> positions_;
  float base_;
  bool neox_;
};

class ContractBackward final : public OpNode {
 public:
  ContractBackward(RawTensor a, RawTensor b, raw::ContractSpec spec) : a_(std::move(a)), b_(std::move(b)), spec_(spec) {}
  const char* name() const override { return "contract"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { a_ = b_ = RawTensor{}; }

 private:
  RawTensor a_, b_;
  raw::ContractSpec spec_;
};

// Zero-copy views. The gradient flows back by the inverse view (or a scatter into zeros).
enum class ViewKind { reinterpret, permute, slice, broadcast };

class ViewBackward final : public OpNode {
 public:
  // reinterpret: parent has `shape` (contiguous reinterpretation of gy);
  // permute: parent axis i is output axis map[i];
  // slice: output is parent[axis: start .. start+len] (drop_axis: select of one index);
  // broadcast: output appended axis `axis` to the parent.
  ViewKind kind = ViewKind::reinterpret;
  int rank = 0;
  Dims shape{};
  AxisMap map{};
  int axis = 0;
  std::int64_t start = 0;
  bool drop_axis = false;
  const char* name() const override { return "view"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
};

// concat along axis: inputs are [a, b]; a has `split` entries along the axis.
class ConcatBackward final : public OpNode {
 public:
  ConcatBackward(int axis, std::vector<std::int64_t> sizes) : axis_(axis), sizes_(std::move(sizes)) {}
  const char* name() const override { return "concat"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;

 private:
  int axis_;
  std::vector<std::int64_t> sizes_;  // extent of each input along the axis
  bool stacked_ = false;

 public:
  void set_stacked() { stacked_ = true; }
};

// Rows gathered along `axis` of a table: gradient scatter-adds into the table's shape.
class GatherBackward final : public OpNode {
 public:
  GatherBackward(std::vector<std::int32_t> ids, int axis, int rank, Dims shape)
      : ids_(std::move(ids)), axis_(axis), rank_(rank), shape_(shape) {}
  const char* name() const override { return "gather"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;

 private:
  std::vector<std::int32_t> ids_;
  int axis_, rank_;
  Dims shape_;
};

// Fused losses: the gradient w.r.t. the input was computed in the forward pass.
class SavedGradBackward final : public OpNode {
 public:
  explicit SavedGradBackward(RawTensor g, RawTensor g2 = {}) : g_(std::move(g)), g2_(std::move(g2)) {}
  const char* name() const override { return "loss"; }
  void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) override;
  void release_saved() override { g_ = g2_ = RawTensor{}; }

 private:
  RawTensor g_, g2_;  // d out / d input (per input)
};

// dtype conversion / contiguous copy: identity gradient.
class IdentityBackward final : public OpNode {
 public:
  const char* name() const override { return "identity"; }
  void backward(Context&, const RawTensor& gy, std::span<RawTensor> grads) override { grads[0] = gy; }
};

}  // namespace fucina::autograd
