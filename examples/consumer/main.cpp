// Links against an installed Fucina: one named-axis contraction, printed.
#include <fmt/core.h>

#include <fucina/fucina.hpp>

int main() {
  using namespace fucina;
  Context ctx({.threads = 1});
  auto x = Tensor<"batch", "in">::from_data(ctx, {1, 2}, {1, 2});
  auto w = Tensor<"out", "in">::from_data(ctx, {2, 2}, {3, 4, 5, 6});
  auto y = x.dot<"in">(ctx, w);
  fmt::print("consumer: y = [{}, {}]\n", y.at({0, 0}), y.at({0, 1}));
  return y.at({0, 0}) == 11.f && y.at({0, 1}) == 17.f ? 0 : 1;
}
