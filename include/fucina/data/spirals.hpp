#pragma once
// The two-spirals toy problem (the spirals demos' data).
//
// Note [Spirals layout]: point i of n per class has t = i/(n−1), angle θ = 2π·turns·t,
// radius r = 0.15 + 0.85t. Class 0 is (r sin θ, r cos θ), class 1 the negated point;
// each coordinate then gets independent N(0, noise²) from rng::normal(seed, 2·row + c).
// Rows interleave the classes (row 2i is class 0, row 2i+1 class 1), so any even-sized
// prefix is balanced.
#include <cmath>
#include <cstdint>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/core/tensor.hpp"

namespace fucina::data {

struct SpiralsOptions {
  std::int64_t points_per_class = 200;
  float noise = 0.02f;  // stddev of the Gaussian jitter per coordinate
  float turns = 1.75f;  // 1.75 turns = 3.5π, as upstream's spirals demo
  std::uint64_t seed = 0;
};

struct Spirals {
  Tensor<"batch", "in"> x;              // [2n, 2]
  TensorT<DType::i32, "batch"> labels;  // [2n], 0 or 1
};

inline Spirals spirals(Context& ctx, const SpiralsOptions& opt = {}) {
  FUCINA_CHECK(opt.points_per_class >= 1, InvalidArgument, "[spirals] points_per_class must be >= 1, got {}", opt.points_per_class);
  FUCINA_CHECK(std::isfinite(opt.noise) && opt.noise >= 0.f, InvalidArgument, "[spirals] noise must be finite and >= 0, got {}",
               opt.noise);
  FUCINA_CHECK(std::isfinite(opt.turns), InvalidArgument, "[spirals] turns must be finite, got {}", opt.turns);
  const std::int64_t n = opt.points_per_class;
  std::vector<float> xs(static_cast<std::size_t>(4 * n));
  std::vector<std::int32_t> ys(static_cast<std::size_t>(2 * n));
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    const double th = 2.0 * 3.14159265358979323846 * opt.turns * t;
    const double r = 0.15 + 0.85 * t;
    const double px = r * std::sin(th), py = r * std::cos(th);
    for (int cls = 0; cls < 2; ++cls) {
      const std::int64_t row = 2 * i + cls;
      const double s = cls == 0 ? 1.0 : -1.0;
      const auto c0 = static_cast<std::uint64_t>(2 * row);
      xs[static_cast<std::size_t>(2 * row)] = static_cast<float>(s * px + opt.noise * rng::normal(opt.seed, c0));
      xs[static_cast<std::size_t>(2 * row + 1)] = static_cast<float>(s * py + opt.noise * rng::normal(opt.seed, c0 + 1));
      ys[static_cast<std::size_t>(row)] = cls;
    }
  }
  return {Tensor<"batch", "in">::from_data(ctx, {2 * n, 2}, xs),
          TensorT<DType::i32, "batch">::from_data(ctx, {2 * n}, ys)};
}

}  // namespace fucina::data
