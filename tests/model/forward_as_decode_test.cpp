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
#include "fucina/model/one_row.hpp"
#include "support/synth_model.hpp"

using namespace fucina;

namespace {


struct Param {
  test::SynthCase c;
  model::LoadOptions load;
  const char* load_name;
};

class ForwardAsDecode : public ::testing::TestWithParam<Param> {
 protected:
  // The case's synthetic model, loaded with its options (the file removed once mapped).
  static model::Model load_case(const Param& p, const std::string& test) {
    const auto path = test::make_synth_model(p.c, test + "_" + p.load_name);
    auto m = model::Model::load(path, p.load);
    std::filesystem::remove(path);
    return m;
  }
};

TEST_P(ForwardAsDecode, EveryRowIsItsOneTokenForward) {
  const auto& [c, load, load_name] = GetParam();
  Context ctx({.threads = 2});
  const auto m = load_case(GetParam(), "as_decode");
  const std::int64_t vocab = m.config().n_vocab;
  constexpr std::int64_t kCtx = 1024, kRows = 17;  // 17 rows: past the quantized GEMM's 16
  for (const model::KvType kv : {model::KvType::f16, model::KvType::f32}) {
    for (const std::int64_t prompt_len : {5, 300}) {  // 300 cached: the one-row forward splits
      const auto prompt = test::pattern_tokens(prompt_len, vocab, 1), drafted = test::pattern_tokens(kRows, vocab, 2);
      const std::int32_t after[1] = {7};
      auto solo = m.new_cache(kCtx, kv), spec = m.new_cache(kCtx, kv);
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

// Note [Speculative batches]: a batch step's decode chunks lead its forward under
// OneRowArithmetic(their rows) and its prompt chunks follow in the same forward. Each decode
// row must be its one-token forward's and the prompt chunk's logits and K/V those of the
// chunk in a forward of its own: 17 decode rows of one sequence, then 40 prompt rows of
// another (past the quantized GEMM's 16, so the two parts take different products).
TEST_P(ForwardAsDecode, LeadingRowsAreOneRowsAndTheRestTheirOwnForward) {
  const auto& [c, load, load_name] = GetParam();
  Context ctx({.threads = 2});
  const auto m = load_case(GetParam(), "as_decode_mixed");
  const std::int64_t vocab = m.config().n_vocab;
  constexpr std::int64_t kCtx = 512, kRows = 17;
  const auto prompt = test::pattern_tokens(30, vocab, 1), drafted = test::pattern_tokens(kRows, vocab, 2),
             other = test::pattern_tokens(40, vocab, 3);
  const std::int32_t after[1] = {7};
  auto solo = m.new_cache(kCtx);
  auto alone = m.new_paged_cache(kCtx, kCtx);
  auto mixed = m.new_paged_cache(2 * kCtx, kCtx);
  m.prefill(ctx, solo, prompt);
  const auto a = mixed.open(), b = mixed.open(), b_alone = alone.open();
  const model::Model::SeqChunk prefill_a{a, prompt};
  m.forward_batch(ctx, mixed, std::span(&prefill_a, 1));
  const model::Model::SeqChunk both[2] = {{a, drafted, true}, {b, other}};
  std::vector<float> got;
  {
    const model::OneRowArithmetic one_row(kRows);
    got = m.forward_batch(ctx, mixed, both).to_vector();
  }
  ASSERT_EQ(got.size(), static_cast<std::size_t>((kRows + 1) * vocab));
  for (std::int64_t r = 0; r < kRows; ++r) {
    const auto want = m.forward(ctx, solo, std::span(drafted).subspan(static_cast<std::size_t>(r), 1)).to_vector();
    ASSERT_EQ(std::vector<float>(got.begin() + r * vocab, got.begin() + (r + 1) * vocab), want)
        << c.name << " " << load_name << ": decode row " << r;
  }
  const model::Model::SeqChunk b_chunk{b_alone, other};
  EXPECT_EQ(std::vector<float>(got.begin() + kRows * vocab, got.end()),
            m.forward_batch(ctx, alone, std::span(&b_chunk, 1)).to_vector())
      << c.name << " " << load_name << ": the prompt chunk";
  // The K/V both left behind: a next token for each, one row at a time.
  const model::Model::SeqChunk next_a{a, after}, next_b{b, after}, next_b_alone{b_alone, after};
  EXPECT_EQ(m.forward_batch(ctx, mixed, std::span(&next_a, 1)).to_vector(), m.forward(ctx, solo, after).to_vector())
      << c.name << " " << load_name << ": the decode rows' K/V";
  EXPECT_EQ(m.forward_batch(ctx, mixed, std::span(&next_b, 1)).to_vector(),
            m.forward_batch(ctx, alone, std::span(&next_b_alone, 1)).to_vector())
      << c.name << " " << load_name << ": the prompt chunk's K/V";
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
