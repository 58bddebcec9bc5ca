// Note [One forward]: the training forward (no cache, autograd on) gives the inference
// forward's logits bit for bit (inference over an f32 KV cache, whose attention takes the
// same arithmetic), for every architecture and weight format; several sequences in one
// training batch give each sequence's logits alone; LoRA factors of zero change nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "fucina/model/model.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/model/trainable.hpp"
#include "support/shared_dir.hpp"
#include "support/synth_model.hpp"

using namespace fucina;

namespace {

using Case = test::SynthCase;

std::vector<Case> cases() { return test::every_format_cases(); }

std::filesystem::path make_model(const Case& c) { return test::make_synth_model(c, "train_fwd"); }

// The case's model, loaded (the file is removed once mapped).
model::Model load_model(const Case& c) {
  const auto path = make_model(c);
  auto m = model::Model::load(path);
  std::filesystem::remove(path);
  return m;
}

std::vector<std::int32_t> tokens(std::int64_t n, std::int64_t vocab, std::int32_t salt) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 37 + salt * 11 + 5) % vocab);
  return t;
}

class TrainForward : public ::testing::TestWithParam<Case> {};

TEST_P(TrainForward, LogitsEqualInference) {
  const Case& c = GetParam();
  Context ctx({.threads = 2});  // before the model, whose adapters it allocates
  auto m = load_model(c);
  const std::int64_t vocab = m.config().n_vocab;
  // Two sequences, one under and one over llama.cpp's 64-row tiled threshold.
  const auto a = tokens(21, vocab, 1), b = tokens(70, vocab, 2);
  std::vector<std::int32_t> both(a);
  both.insert(both.end(), b.begin(), b.end());
  const std::vector<std::int64_t> starts{0, 21, 91};

  const auto train = m.forward_train(ctx, both, starts).to_vector();
  for (int s = 0; s < 2; ++s) {
    const auto& ids = s == 0 ? a : b;
    auto cache = m.new_cache(128, model::KvType::f32);
    const auto inf = m.forward_all(ctx, cache, ids).to_vector();
    const std::size_t off = static_cast<std::size_t>(starts[static_cast<std::size_t>(s)] * vocab);
    ASSERT_EQ(inf.size(), ids.size() * static_cast<std::size_t>(vocab));
    std::size_t differ = 0;
    float max_diff = 0;
    for (std::size_t i = 0; i < inf.size(); ++i) {
      differ += std::memcmp(&inf[i], &train[off + i], sizeof(float)) != 0;
      max_diff = std::max(max_diff, std::fabs(inf[i] - train[off + i]));
    }
    EXPECT_EQ(differ, 0u) << c.name << " sequence " << s << ": max |diff| " << max_diff;
  }
}

TEST_P(TrainForward, ZeroLoraChangesNothingAndGetsGradients) {
  const Case& c = GetParam();
  Context ctx({.threads = 2});  // before the model, whose adapters it allocates
  auto m = load_model(c);
  const auto ids = tokens(33, m.config().n_vocab, 3);
  const auto plain = m.forward_train(ctx, ids).to_vector();

  auto& w = m.mutable_weights().layers[0];
  const std::int64_t r = 4, embd = m.config().n_embd, qd = w.wq.rows();
  std::vector<float> av(static_cast<std::size_t>(r * embd));
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = 0.01f * static_cast<float>(static_cast<int>(i % 7) - 3);
  auto la = Tensor<"rank", "embd">::from_data(ctx, {r, embd}, av).variable();
  auto lb = Tensor<"qd", "rank">::zeros(ctx, {qd, r}).variable();
  w.wq.add_lora({la, lb, 2.f});
  const auto logits = m.forward_train(ctx, ids);
  EXPECT_EQ(logits.to_vector(), plain);  // B = 0: exactly the base
  sum_all(ctx, logits).backward(ctx);
  ASSERT_TRUE(lb.grad().defined());
  double norm = 0;
  for (float g : lb.grad().to_vector()) norm += double(g) * g;
  EXPECT_GT(norm, 0.0) << "B's gradient is zero: the LoRA path is not connected";
}

INSTANTIATE_TEST_SUITE_P(Models, TrainForward, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace

namespace {

// Gradients of every weight with each block checkpointed (recomputed in backward) equal
// the plain run's bit for bit: the kernels are deterministic.
TEST(TrainForwardCheckpoint, SameGradientsBitForBit) {
  Context ctx({.threads = 2});
  const auto path = make_model({"moe", test::small_spec("qwen3moe", 64, 4, 2, DType::f32)});
  auto a = model::Model::load(path), b = model::Model::load(path);
  std::filesystem::remove(path);
  const auto pa = model::make_trainable(ctx, a.mutable_weights(), a.config());
  const auto pb = model::make_trainable(ctx, b.mutable_weights(), b.config());
  const auto ids = tokens(40, a.config().n_vocab, 4);
  const std::vector<std::int64_t> starts{0, 15, 40};
  sum_all(ctx, a.forward_train(ctx, ids, starts)).backward(ctx);
  sum_all(ctx, b.forward_train(ctx, ids, starts, /*checkpoint=*/true)).backward(ctx);
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const auto ga = model::param_ref(pa[i]).grad, gb = model::param_ref(pb[i]).grad;
    ASSERT_EQ(ga.size(), gb.size()) << pa[i].name;
    EXPECT_TRUE(std::equal(ga.begin(), ga.end(), gb.begin())) << pa[i].name;
  }
}

TEST(TrainForwardCheckpoint, QuantizedWeightsAreNotTrainable) {
  Context ctx({.threads = 2});
  const auto path = make_model({"q8", test::small_spec("qwen3", 256, 4, 1, DType::f32), quant::FileType::MostlyQ8_0});
  auto m = model::Model::load(path);
  std::filesystem::remove(path);
  try {
    model::make_trainable(ctx, m.mutable_weights(), m.config());
    FAIL() << "a Q8_0 model was made trainable";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("--lora"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// The same on the shared test models (../shared/models), one sequence of 80 rows.
TEST(TrainForwardShared, LogitsEqualInference) {
  FUCINA_REQUIRE_SHARED(shared);
  for (const char* name : {"tiny-llama-spm-f32.gguf", "tiny-qwen3-f16.gguf", "tiny-qwen3moe-f16.gguf"}) {
    Context ctx({.threads = 2});
    const auto m = model::Model::load(shared / "models" / name);
    const auto ids = tokens(80, m.config().n_vocab, 9);
    const auto train = m.forward_train(ctx, ids).to_vector();
    auto cache = m.new_cache(128, model::KvType::f32);
    const auto inf = m.forward_all(ctx, cache, ids).to_vector();
    ASSERT_EQ(train.size(), inf.size()) << name;
    EXPECT_EQ(std::memcmp(train.data(), inf.data(), train.size() * sizeof(float)), 0) << name;
  }
}

}  // namespace
