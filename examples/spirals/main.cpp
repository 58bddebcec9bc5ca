// Two spirals, an MLP trained with AdamW to >= 99% training accuracy.
#include <chrono>

#include "train.hpp"

int main() {
  fucina::Context ctx({.threads = 2});
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = spirals_example::train(ctx, 5000, 0.99f, true);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{} after {} steps in {:.2f} s: accuracy {:.1f}%\n", r.accuracy >= 0.99f ? "done" : "NOT converged", r.steps,
             secs, 100.0 * r.accuracy);
  return r.accuracy >= 0.99f ? 0 : 1;
}
