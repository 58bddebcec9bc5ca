// Note [One-row arithmetic]: forward_as_decode() over k+1 new tokens gives every row the
// logits, bit for bit, of decoding the tokens one forward() at a time, and leaves the same
// K/V behind (the next token's logits agree too), for every architecture, weight format
// and load option, over an f16 and an f32 KV cache, before and past the split decode of
// Note [split decode]. Without the scope the many-row products sum otherwise: the test
// would see it.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "fucina/model/model.hpp"
#include "support/synth_model.hpp"

using namespace fucina;

namespace {


struct Param {
  test::SynthCase c;
  model::LoadOptions load;
  const char* load_name;
};

class ForwardAsDecode : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardAsDecode, EveryRowIsItsOneTokenForward) {
  const auto& [c, load, load_name] = GetParam();
  Context ctx({.threads = 2});
  const auto path = test::make_synth_model(c, std::string("as_decode_") + load_name);
  const auto m = model::Model::load(path, load);
  std::filesystem::remove(path);
  const std::int64_t vocab = m.config().n_vocab;
  constexpr std::int64_t kCtx = 1024, kRows = 17;  // 17 rows: past the quantized GEMM's 16
  for (const model::KvType kv : {model::KvType::f16, model::KvType::f32}) {
    for (const std::int64_t prompt_len : {5, 300}) {  // 300 cached: the one-row forward splits
      const auto prompt = test::pattern_tokens(prompt_len, vocab, 1), drafted = test::pattern_tokens(kRows, vocab, 2);
      const std::int32_t after[1] = {7};
      auto solo = m.new_cache(ctx, kCtx, kv), spec = m.new_cache(ctx, kCtx, kv);
      m.prefill(ctx, solo, prompt);
      m.prefill(ctx, spec, prompt);
      const auto rows = m.forward_as_decode(ctx, spec, drafted).to_vector();
      ASSERT_EQ(rows.size(), static_cast<std::size_t>(kRows * vocab));
      for (std::int64_t r = 0; r < kRows; ++r) {
        const auto want = m.forward(ctx, solo, std::span(drafted).subspan(static_cast<std::size_t>(r), 1)).to_vector();
        const std::vector<float> got(rows.begin() + r * vocab, rows.begin() + (r + 1) * vocab);
        ASSERT_EQ(got, want) << c.name << " " << load_name << ", " << model::kv_type_name(kv) << " KV, prompt " << prompt_len
                             << ": row " << r;
      }
      EXPECT_EQ(m.forward(ctx, spec, after).to_vector(), m.forward(ctx, solo, after).to_vector())
          << c.name << " " << load_name << ", " << model::kv_type_name(kv) << " KV, prompt " << prompt_len << ": the K/V left behind";
    }
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& c : test::every_format_cases()) p.push_back({c, {}, "default"});
  const auto q4_0 = test::SynthCase{"qwen3_q4_0", test::small_spec("qwen3", 256, 4, 1, DType::f32), quant::FileType::MostlyQ4_0};
  const auto q8_0 = test::SynthCase{"qwen3_q8_0", test::small_spec("qwen3", 256, 4, 1, DType::f32), quant::FileType::MostlyQ8_0};
  p.push_back({q4_0, {}, "default"});
  p.push_back({q4_0, {.repack = false}, "no_repack"});
  p.push_back({q8_0, {.fast_prefill = true}, "fast_prefill"});
  p.push_back({q8_0, {.repack = false}, "no_repack"});
  return p;
}
INSTANTIATE_TEST_SUITE_P(Models, ForwardAsDecode, ::testing::ValuesIn(params()), [](const ::testing::TestParamInfo<Param>& i) {
  return std::string(i.param.c.name) + "_" + i.param.load_name;
});

}  // namespace
