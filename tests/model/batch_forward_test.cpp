// Note [Batched forward]: 8 sequences of different prompt lengths that start and finish at
// different steps, run together through forward_batch() over one PagedKvCache, give each
// sequence the logits of its solo run (forward() over its own KvCache, the same chunks),
// for every architecture and weight format; blocks come back when a sequence ends; a forked
// prefix is shared, not copied, and continues as the original would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "fucina/model/model.hpp"
#include "support/synth_model.hpp"

using namespace fucina;

namespace {

using Case = test::SynthCase;


// One sequence of the schedule: its prompt runs as one chunk at step `start`, then one
// token per step for `decode` steps. 70 rows take the tiled attention; 300 cached positions
// over a 512 context take the split decode of Note [split decode].
struct Plan {
  std::int64_t prompt, start, decode;
};
const Plan kPlans[] = {{3, 0, 9}, {7, 0, 4}, {12, 1, 12}, {20, 2, 3}, {33, 3, 8}, {5, 5, 10}, {70, 6, 5}, {300, 8, 4}};
constexpr std::int64_t kCtx = 512;

// The chunk sequence i runs at step t (empty when it is not running).
std::vector<std::int32_t> chunk_at(const Plan& p, std::size_t i, std::int64_t t, std::int64_t vocab) {
  if (t == p.start) return test::pattern_tokens(p.prompt, vocab, static_cast<std::int32_t>(i));
  if (t > p.start && t <= p.start + p.decode) return test::pattern_tokens(1, vocab, static_cast<std::int32_t>(100 * i + t));
  return {};
}

// Largest |a - b| and whether the argmax agrees.
struct Diff {
  float max = 0;
  bool argmax_equal = true;
};
Diff compare(std::span<const float> a, std::span<const float> b) {
  Diff d;
  for (std::size_t i = 0; i < a.size(); ++i) d.max = std::max(d.max, std::fabs(a[i] - b[i]));
  d.argmax_equal = std::max_element(a.begin(), a.end()) - a.begin() == std::max_element(b.begin(), b.end()) - b.begin();
  return d;
}

bool f32_weights(const Case& c) { return c.spec.dtype == DType::f32 && c.quant == quant::FileType::AllF32; }
// The bar for f32 weights (over an f32 KV cache: an f16 cache rounds K/V, where the
// tiled vs vec sums of Note [Batched forward] can flip a rounding, as can f16 weights'
// rounded activations). Greedy picks must agree everywhere.
float tolerance(const Case& c, model::KvType kv) { return f32_weights(c) && kv == model::KvType::f32 ? 1e-5f : 1e-2f; }

struct Param {
  Case c;
  model::KvType kv;
};

class BatchForward : public ::testing::TestWithParam<Param> {};

TEST_P(BatchForward, EachSequenceGetsItsSoloLogits) {
  const Case& c = GetParam().c;
  const model::KvType kv = GetParam().kv;
  Context ctx({.threads = 2});
  const auto path = test::make_synth_model(c, "batch_fwd");
  const auto m = model::Model::load(path);
  std::filesystem::remove(path);
  const std::int64_t vocab = m.config().n_vocab;

  // Solo runs: logits of each chunk's last token, per (sequence, step).
  std::map<std::pair<std::size_t, std::int64_t>, std::vector<float>> solo;
  for (std::size_t i = 0; i < std::size(kPlans); ++i) {
    auto cache = m.new_cache(kCtx, kv);
    for (std::int64_t t = 0; t < 20; ++t)
      if (const auto ids = chunk_at(kPlans[i], i, t, vocab); !ids.empty())
        solo[{i, t}] = m.forward(ctx, cache, ids).to_vector();
  }

  // A budget smaller than all sequences together: blocks of finished ones are reused.
  auto cache = m.new_paged_cache(640, kCtx, kv);
  std::vector<model::SeqId> seq(std::size(kPlans), -1);
  Diff worst;
  std::int64_t compared = 0, max_rows = 0;
  for (std::int64_t t = 0; t < 20; ++t) {
    std::vector<std::vector<std::int32_t>> ids;
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < std::size(kPlans); ++i) {
      auto chunk = chunk_at(kPlans[i], i, t, vocab);
      if (chunk.empty()) {
        if (seq[i] >= 0 && t > kPlans[i].start + kPlans[i].decode) cache.close(std::exchange(seq[i], -1));
        continue;
      }
      if (t == kPlans[i].start) seq[i] = cache.open();
      ids.push_back(std::move(chunk));
      who.push_back(i);
    }
    if (who.empty()) continue;
    std::vector<model::Model::SeqChunk> chunks;
    for (std::size_t j = 0; j < who.size(); ++j) chunks.push_back({seq[who[j]], ids[j]});
    const auto logits = m.forward_batch(ctx, cache, chunks).to_vector();
    ASSERT_EQ(logits.size(), who.size() * static_cast<std::size_t>(vocab));
    max_rows = std::max<std::int64_t>(max_rows, static_cast<std::int64_t>(who.size()));
    for (std::size_t j = 0; j < who.size(); ++j) {
      const auto& want = solo.at({who[j], t});
      const Diff d = compare(std::span(logits).subspan(j * static_cast<std::size_t>(vocab), want.size()), want);
      EXPECT_LE(d.max, tolerance(c, kv)) << c.name << ": sequence " << who[j] << " at step " << t;
      EXPECT_TRUE(d.argmax_equal) << c.name << ": sequence " << who[j] << " at step " << t;
      worst.max = std::max(worst.max, d.max);
      ++compared;
    }
  }
  EXPECT_GE(max_rows, 6);  // the schedule really overlaps
  EXPECT_EQ(compared, static_cast<std::int64_t>(solo.size()));
  for (auto s : seq)
    if (s >= 0) cache.close(s);
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks());
  std::printf("[ measured ] %s, %s KV: %lld logit rows, max |batched - solo| = %.3g\n", c.name, model::kv_type_name(kv).data(),
              static_cast<long long>(compared), static_cast<double>(worst.max));
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const Case& c : test::every_format_cases()) {
    p.push_back({c, model::KvType::f16});
    if (f32_weights(c)) p.push_back({c, model::KvType::f32});
    if (model::synth_head_dim(c.spec) % 32 == 0)
      p.push_back({c, model::KvType::q8_0});  // Note [q8_0 KV cache]: blocks of 32 per head row
  }
  return p;
}
INSTANTIATE_TEST_SUITE_P(Models, BatchForward, ::testing::ValuesIn(params()), [](const ::testing::TestParamInfo<Param>& i) {
  return std::string(i.param.c.name) + "_kv_" + std::string(model::kv_type_name(i.param.kv));
});

// A sequence alone in a batch takes its solo arithmetic exactly: same rows, same kernels.
TEST(BatchForwardOne, AloneIsBitIdenticalToForward) {
  Context ctx({.threads = 2});
  const auto path = test::make_synth_model({"q", test::small_spec("qwen3", 256, 4, 1, DType::f16)}, "batch_one");
  const auto m = model::Model::load(path);
  std::filesystem::remove(path);
  const auto prompt = test::pattern_tokens(45, m.config().n_vocab, 7);
  auto solo = m.new_cache(kCtx);
  auto paged = m.new_paged_cache(kCtx, kCtx);
  const auto s = paged.open();
  const model::Model::SeqChunk chunk{s, prompt};
  EXPECT_EQ(m.forward_batch(ctx, paged, std::span(&chunk, 1)).to_vector(), m.forward(ctx, solo, prompt).to_vector());
  const std::int32_t next[1] = {9};
  const model::Model::SeqChunk one{s, next};
  EXPECT_EQ(m.forward_batch(ctx, paged, std::span(&one, 1)).to_vector(), m.forward(ctx, solo, next).to_vector());
}

// fork() shares the full blocks of a prefix and copies only a partly filled last block; the
// fork continues exactly as a solo run over the same tokens.
TEST(BatchForwardFork, SharedPrefixContinuesAsASoloRun) {
  Context ctx({.threads = 2});
  const auto path = test::make_synth_model({"l", test::small_spec("llama", 64, 4, 2, DType::f32)}, "batch_fork");
  const auto m = model::Model::load(path);
  std::filesystem::remove(path);
  const auto prompt = test::pattern_tokens(40, m.config().n_vocab, 3);  // 32 + 8: one full block, one partial
  auto paged = m.new_paged_cache(4 * 32, kCtx);
  const auto a = paged.open();
  const model::Model::SeqChunk first{a, prompt};
  m.forward_batch(ctx, paged, std::span(&first, 1));
  EXPECT_EQ(paged.free_blocks(), 2);
  const auto b = paged.fork(ctx, a, 40);
  EXPECT_EQ(paged.free_blocks(), 1) << "the full block is shared, the partial one copied";
  EXPECT_EQ(paged.size(b), 40);

  const std::int32_t ta[1] = {11}, tb[1] = {12};
  const model::Model::SeqChunk both[2] = {{a, ta}, {b, tb}};
  const auto got = m.forward_batch(ctx, paged, both).to_vector();
  const auto vocab = static_cast<std::size_t>(m.config().n_vocab);
  for (int k = 0; k < 2; ++k) {
    auto solo = m.new_cache(kCtx);
    m.forward(ctx, solo, prompt);
    const auto want = m.forward(ctx, solo, std::span(k == 0 ? ta : tb, 1)).to_vector();
    EXPECT_LE(compare(std::span(got).subspan(static_cast<std::size_t>(k) * vocab, vocab), want).max, 1e-5f) << k;
  }
  paged.close(a);
  EXPECT_EQ(paged.free_blocks(), 2) << "b holds the shared block and its own";
  paged.close(b);
  EXPECT_EQ(paged.free_blocks(), paged.total_blocks());
}

TEST(BatchForwardErrors, BudgetContextAndDuplicatesAreClearErrors) {
  Context ctx({.threads = 2});
  const auto path = test::make_synth_model({"l", test::small_spec("llama", 64, 4, 2, DType::f32)}, "batch_err");
  const auto m = model::Model::load(path);
  std::filesystem::remove(path);
  auto paged = m.new_paged_cache(64, 48);
  const auto a = paged.open(), b = paged.open();
  const auto p40 = test::pattern_tokens(40, m.config().n_vocab, 1), p50 = test::pattern_tokens(50, m.config().n_vocab, 2);
  const auto message = [&](std::span<const model::Model::SeqChunk> chunks) {
    try {
      m.forward_batch(ctx, paged, chunks);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const model::Model::SeqChunk too_long{a, p50}, dup[2] = {{a, p40}, {a, p40}}, fits{a, p40}, over{b, p40};
  EXPECT_NE(message(std::span(&too_long, 1)).find("context length 48"), std::string::npos);
  EXPECT_NE(message(dup).find("appears twice"), std::string::npos);
  EXPECT_EQ(message(std::span(&fits, 1)), "no error");
  EXPECT_NE(message(std::span(&over, 1)).find("budget is used up"), std::string::npos);
  EXPECT_EQ(paged.size(b), 0);
}

}  // namespace
