// A short run of examples/spirals: the loss falls and the accuracy passes a threshold.
#include <gtest/gtest.h>

#include "../../examples/spirals/train.hpp"

TEST(Spirals, ShortTrainingRunLearns) {
  fucina::Context ctx({.threads = 2});
  const auto r = spirals_example::train(ctx, 400, 0.97f, false);
  EXPECT_LT(r.last_loss, 0.5f * r.first_loss);
  EXPECT_GE(r.accuracy, 0.97f);
}
