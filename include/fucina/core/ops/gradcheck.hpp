#pragma once
// Finite-difference gradient check: compares backward's gradients of
// L = sum(f(inputs) * R) (R a fixed random weight, so every output element matters)
// with central differences, element by element: |num - ana| <= atol + rtol * |ana|.
#include <fmt/core.h>

#include <string>
#include <tuple>

#include "fucina/core/ops/pointwise.hpp"
#include "fucina/core/ops/reduce.hpp"

namespace fucina {

struct GradcheckOptions {
  float eps = 1e-3f;
  double atol = 1e-3;
  double rtol = 1e-2;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string report;  // the first failing element, if any
};

template <class F, FloatTensor... X>
GradcheckResult gradcheck(Context& ctx, F&& f, const GradcheckOptions& opt, const X&... inputs) {
  auto vars = std::make_tuple(clone(ctx, inputs.detach()).variable()...);
  using Y = decltype(f(ctx, inputs...));
  Y weight;
  auto loss_of = [&](auto&... xs) {
    Y y = f(ctx, xs...);
    if (!weight.defined()) weight = Y::uniform(ctx, y.sizes(), 12345, 0.5f, 1.5f);
    return sum_all(ctx, mul(ctx, y, weight));
  };
  std::apply([&](auto&... v) { loss_of(v...).backward(ctx); }, vars);
  GradcheckResult res;
  int which = 0;
  auto check_one = [&](auto& var) {
    auto ana_t = var.grad();
    std::vector<float> ana = ana_t.defined() ? ana_t.to_vector() : std::vector<float>(static_cast<std::size_t>(var.numel()), 0.f);
    auto data = var.mutable_data();
    for (std::size_t j = 0; j < data.size(); ++j) {
      const float orig = data[j];
      autograd::NoGradGuard ng;
      data[j] = orig + opt.eps;
      const double up = std::apply([&](auto&... v) { return double(loss_of(v...).item()); }, vars);
      data[j] = orig - opt.eps;
      const double down = std::apply([&](auto&... v) { return double(loss_of(v...).item()); }, vars);
      data[j] = orig;
      const double num = (up - down) / (2.0 * opt.eps);
      const double err = std::abs(num - ana[j]);
      res.max_abs_error = std::max(res.max_abs_error, err);
      if (res.ok && err > opt.atol + opt.rtol * std::abs(ana[j])) {
        res.ok = false;
        res.report = fmt::format("input {} element {}: numeric {:.6g} vs analytic {:.6g}", which, j, num, ana[j]);
      }
    }
    ++which;
  };
  std::apply([&](auto&... v) { (check_one(v), ...); }, vars);
  return res;
}

template <class F, FloatTensor... X>
GradcheckResult gradcheck(Context& ctx, F&& f, const X&... inputs) {
  return gradcheck(ctx, std::forward<F>(f), GradcheckOptions{}, inputs...);
}

}  // namespace fucina
