// Every TYPE and flag variant in goldens.json on both generated models (the unit suite checks
// the core subset): Q2_K..Q5_K_S mixes, IQ4_NL, TQ1_0/TQ2_0, F32, --pure, --leave-output-tensor.
#include <gtest/gtest.h>

#include "quantize/golden_support.hpp"

namespace fucina::quant {
namespace {

TEST(QuantizeGoldensAll, SyntheticModelsMatchLlamaQuantizeForEveryType) {
  EXPECT_EQ(test::check_synthetic_goldens([](const test::QuantizeGolden&) { return true; }), 2 * 31);
}

}  // namespace
}  // namespace fucina::quant
