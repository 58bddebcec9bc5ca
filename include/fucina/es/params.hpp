#pragma once
// ParamSet: an ordered list of f32 tensors seen as one flat parameter vector. Global
// index = offset of the tensor + row-major element index; it is the index the ES noise
// is drawn at, so the order tensors are added in is part of a run's identity.
//
// A model takes part in ES by exposing its tensors to a visitor:
//   struct Mlp { Tensor<"in","hidden"> w1; ...
//     template <class F> void for_each_param(F&& f) { f(w1); f(b1); ... } };
// params_of(model) views them; replica_of(ctx, model) deep-copies them.
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/ops/view.hpp"
#include "fucina/core/tensor.hpp"

namespace fucina::es {

class ParamSet {
 public:
  // Views `t` (its buffer stays alive with the set). Writes through the set land in t.
  template <FloatTensor T>
  void add(const T& t) {
    FUCINA_CHECK(t.defined(), InvalidArgument, "[es::ParamSet] parameter {} is an undefined tensor", tensors_.size());
    FUCINA_CHECK(t.is_contiguous(), UnsupportedView, "[es::ParamSet] parameter {} is a strided view; pass a contiguous tensor",
                 tensors_.size());
    tensors_.push_back(t.raw());
    offsets_.push_back(size_);
    size_ += t.numel();
  }

  std::int64_t size() const noexcept { return size_; }
  std::size_t count() const noexcept { return tensors_.size(); }
  std::int64_t offset(std::size_t k) const noexcept { return offsets_[k]; }
  std::span<float> tensor(std::size_t k) const noexcept {
    return {tensors_[k].data<float>(), static_cast<std::size_t>(tensors_[k].numel())};
  }

  // Same number of tensors with the same element counts.
  bool same_layout(const ParamSet& o) const noexcept {
    if (o.count() != count()) return false;
    for (std::size_t k = 0; k < count(); ++k)
      if (o.tensors_[k].numel() != tensors_[k].numel()) return false;
    return true;
  }

  // Calls f(k, global_begin, local_begin, length) for the pieces of tensors covering
  // the global range [begin, end).
  template <class F>
  void for_each_piece(std::int64_t begin, std::int64_t end, F&& f) const {
    for (std::size_t k = 0; k < count() && begin < end; ++k) {
      const std::int64_t lo = offsets_[k], hi = lo + tensors_[k].numel();
      if (hi <= begin) continue;
      const std::int64_t b = std::max(begin, lo), e = std::min(end, hi);
      if (b < e) f(k, b, b - lo, e - b);
    }
  }

  // Values in global order (for tests and checkpoints).
  std::vector<float> to_vector() const {
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(size_));
    for (std::size_t k = 0; k < count(); ++k) {
      auto s = tensor(k);
      out.insert(out.end(), s.begin(), s.end());
    }
    return out;
  }

 private:
  std::vector<RawTensor> tensors_;
  std::vector<std::int64_t> offsets_;
  std::int64_t size_ = 0;
};

template <class M>
concept Parametric = requires(M& m) { m.for_each_param([](auto&) {}); };

template <Parametric M>
ParamSet params_of(M& model) {
  ParamSet p;
  model.for_each_param([&](auto& t) { p.add(t); });
  return p;
}

// A copy of `model` whose parameter tensors are fresh contiguous buffers.
template <Parametric M>
M replica_of(Context& ctx, const M& model) {
  M copy = model;
  copy.for_each_param([&](auto& t) { t = clone(ctx, t); });
  return copy;
}

}  // namespace fucina::es
