// The README quick start: tags, dot and einsum (kept in sync with README.md).
#include <fmt/ranges.h>

#include <fucina/fucina.hpp>

int main() {
  using namespace fucina;
  Context ctx({.threads = 2});                                       // worker pool + buffer pool
  auto x = Tensor<"batch", "in">::randn(ctx, {4, 3}, /*seed=*/1);     // axes named in the type
  auto w = Tensor<"out", "in">::randn(ctx, {2, 3}, /*seed=*/2);       // GGUF-style [out, in]
  auto b = Tensor<"out">::zeros(ctx, {2});
  auto h = tanh(ctx, add(ctx, x.dot<"in">(ctx, w), b));              // <"batch","out">; b broadcasts by name
  auto q = Tensor<"head", "q", "d">::randn(ctx, {2, 5, 8}, 3);
  auto k = Tensor<"head", "k", "d">::randn(ctx, {2, 5, 8}, 4);
  auto scores = einsum<"head", "q", "k">(ctx, q, k);                  // the output tags are the equation
  auto attn = softmax<"k">(ctx, mul(ctx, scores, 1.f / std::sqrt(8.f)));
  fmt::print("h: {}\nattn row sums: {}\n", h.to_vector(), attn.sum<"k">(ctx).to_vector());
  // x.dot<"hidden">(ctx, w);   // compile error: tensor tag not found
}
