#pragma once
// A random product case for the packed kernels' tests: ggml weight rows from our reference
// encoders, activations in the packed kernels' format and in the one-row kernels' format,
// and both sides decoded (for error bounds).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::quant::test {

struct PackedCase {
  std::vector<std::byte> weights, acts, dot_acts;  // ggml rows, packed acts, one-row kernel acts
  std::vector<float> wf, af;                       // decoded values
  std::int64_t rows = 0, cols = 0, n_act = 0;
};

inline PackedCase make_packed_case(QuantType t, std::int64_t rows, std::int64_t cols, std::int64_t n_act, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  PackedCase c;
  c.rows = rows;
  c.cols = cols;
  c.n_act = n_act;
  const QuantType at = codec_traits(t).vec_dot_type;
  const std::int64_t wb = row_bytes(t, cols), pb = packed_act_bytes(t, cols), ab = row_bytes(at, cols);
  c.weights.resize(static_cast<std::size_t>(rows * wb));
  c.acts.resize(static_cast<std::size_t>(n_act * pb));
  c.dot_acts.resize(static_cast<std::size_t>(n_act * ab));
  c.wf.resize(static_cast<std::size_t>(rows * cols));
  c.af.resize(static_cast<std::size_t>(n_act * cols));
  std::vector<float> x(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    // A per-row offset gives the K formats non-trivial mins; some rows span a wide range.
    const float offset = static_cast<float>(r % 5) - 2.f, spread = 1.f + static_cast<float>(r % 7);
    for (float& v : x) v = offset + g(rng) * spread;
    quantize_row(t, x.data(), c.weights.data() + r * wb, cols);
    dequantize_row(t, c.weights.data() + r * wb, c.wf.data() + r * cols, cols);
  }
  for (std::int64_t i = 0; i < n_act; ++i) {
    for (float& v : x) v = g(rng);
    quantize_packed_act(t, x.data(), c.acts.data() + i * pb, cols);
    quantize_row_activation(at, x.data(), c.dot_acts.data() + i * ab, cols);
    dequantize_row(at, c.dot_acts.data() + i * ab, c.af.data() + i * cols, cols);
  }
  return c;
}

// The activation row counts the kernels are tested at: every tile width up to and past
// one full tile (detail::kActTile = 8), and a few rows beyond.
inline constexpr std::int64_t kActRowCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17};

// Each activation row of a batch gets the very floats it gets when multiplied alone
// (the batched-decode promise: a sequence's logits do not depend on its batch).
inline void expect_rows_equal_solo_runs(PackedKernel k, const PackedCase& c, const PackedMatrix& m) {
  const std::int64_t pb = packed_act_bytes(m.type(), c.cols);
  std::vector<float> all(static_cast<std::size_t>(c.n_act * c.rows)), one(static_cast<std::size_t>(c.rows));
  k(m, 0, m.groups(), c.acts.data(), c.n_act, all.data(), c.rows);
  for (std::int64_t i = 0; i < c.n_act; ++i) {
    k(m, 0, m.groups(), c.acts.data() + i * pb, 1, one.data(), c.rows);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + i * c.rows, one.size() * sizeof(float)), 0)
        << "act row " << i << " of " << c.n_act;
  }
}

}  // namespace fucina::quant::test
