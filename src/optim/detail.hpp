#pragma once
// Private helpers shared by the optimizer implementations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/ranges.h>
#include <span>
#include <string>

#include "fucina/core/context.hpp"
#include "fucina/core/error.hpp"
#include "fucina/optim/param.hpp"
#include "fucina/optim/state.hpp"

namespace fucina::optim::detail {

// Fixed work grid: chunk boundaries never depend on the thread count.
inline constexpr std::int64_t kChunk = std::int64_t{1} << 15;

template <class F>
void for_chunks(Context& ctx, std::int64_t n, F&& f) {
  if (n <= kChunk) {
    if (n > 0) f(std::int64_t{0}, n);
    return;
  }
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  ctx.pool().parallel_for(chunks, [&](std::int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

// Sum of squares in f64: sequential within each chunk, chunk partials added in order.
double sum_squares(Context& ctx, std::span<const float> x);

inline float f32(double v) { return static_cast<float>(v); }

// torch's lerp: a + w*(b-a) for |w| < 0.5, else b - (b-a)*(1-w).
inline float lerp(float a, float b, float w) { return std::fabs(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w); }

inline std::string field(const std::string& key, const char* name) { return "state/" + key + "/" + name; }

inline void check_finite_nonneg(double v, const char* what, const char* op) {
  FUCINA_CHECK(std::isfinite(v) && v >= 0.0, InvalidArgument, "[{}] {} must be finite and >= 0, got {}", op, what, v);
}
inline void check_beta(double v, const char* what, const char* op) {
  FUCINA_CHECK(v >= 0.0 && v < 1.0, InvalidArgument, "[{}] {} must be in [0, 1), got {}", op, what, v);
}

// Before any update: a param whose state exists must still have the state's shape.
template <class SlotMap>
void check_slot_shapes(const SlotMap& slots, std::span<const ParamRef> params, const char* op) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string key = param_key(params[i], i);
    auto it = slots.find(key);
    FUCINA_CHECK(it == slots.end() || it->second.shape == params[i].shape, ShapeMismatch,
                 "[{}] param '{}' has shape [{}] but its state has [{}]", op, key, fmt::join(params[i].shape, ", "),
                 fmt::join(it->second.shape, ", "));
  }
}

// Reads the common slot header (shape, step) and checks the step is sane.
std::vector<std::int64_t> load_shape(const StateDict& dict, const std::string& key);
std::int64_t load_step(const StateDict& dict, const std::string& key);
std::vector<float> load_buffer(const StateDict& dict, const std::string& key, const char* name,
                               std::span<const std::int64_t> shape);

}  // namespace fucina::optim::detail
