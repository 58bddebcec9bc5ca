// Quantized MoE expert stacks: expert e of a stack is rows [e * Out, (e + 1) * Out) of the
// stacked ggml tensor, and its product equals that of the same rows quantized on their own.
#include <gtest/gtest.h>

#include <vector>

#include "fucina/model/weights.hpp"
#include "fucina/quant/traits.hpp"

using namespace fucina;

TEST(QuantExperts, ExpertIsARowOffsetViewOfTheStack) {
  Context ctx({.threads = 2});
  const std::int64_t n_expert = 3, out = 8, in = 256, n = 5;
  const auto w = Tensor<"r", "i">::randn(ctx, {n_expert * out, in}, 11).to_vector();
  const auto x = Tensor<"seq", "embd">::randn(ctx, {n, in}, 12);
  for (auto type : {quant::QuantType::Q8_0, quant::QuantType::Q4_0, quant::QuantType::Q4_K, quant::QuantType::Q6_K}) {
    SCOPED_TRACE(quant::codec_traits(type).name);
    const std::int64_t rb = quant::row_bytes(type, in);
    std::vector<std::byte> stack(static_cast<std::size_t>(rb * n_expert * out));
    for (std::int64_t r = 0; r < n_expert * out; ++r)
      quant::quantize_row(type, w.data() + r * in, stack.data() + r * rb, in);
    model::QuantMatrix q;
    q.data = stack.data();
    q.type = type;
    q.rows = n_expert * out;
    q.cols = in;
    q.row_bytes = rb;
    const model::ExpertWeights<"eff", "embd"> experts(q, n_expert);
    EXPECT_TRUE(experts.is_quant());
    EXPECT_EQ(experts.n_expert(), n_expert);
    for (std::int64_t e = 0; e < n_expert; ++e) {
      const auto we = experts.expert(e);
      ASSERT_TRUE(we.is_quant());
      EXPECT_EQ(we.rows(), out);
      EXPECT_EQ(we.quant().data, stack.data() + e * out * rb);
      // The same rows quantized separately give the same product, bit for bit.
      std::vector<std::byte> own(static_cast<std::size_t>(rb * out));
      for (std::int64_t r = 0; r < out; ++r) quant::quantize_row(type, w.data() + (e * out + r) * in, own.data() + r * rb, in);
      model::QuantMatrix qe = q;
      qe.data = own.data();
      qe.rows = out;
      const auto got = model::linear<"embd">(ctx, x, we).to_vector();
      const auto want = model::linear<"embd">(ctx, x, model::Weight<"eff", "embd">(qe)).to_vector();
      EXPECT_EQ(got, want);
    }
    EXPECT_THROW((void)experts.expert(n_expert), Error);
    EXPECT_THROW((void)experts.expert(-1), Error);
  }
}
