// Logit parity with llama.cpp on the tiny synthetic models in ../shared/models: for each
// golden prompt, the tokenizer's ids equal llama.cpp's, the last prompt position's logits
// match (max abs diff <= 1e-3, top-5 ids identical) and 32 greedy tokens are identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include <unistd.h>

#include "fucina/model/model.hpp"
#include "fucina/quant/quantize_model.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "support/shared_dir.hpp"

using namespace fucina;

namespace {

std::vector<float> read_f32(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

std::vector<std::int32_t> top_ids(std::span<const float> v, std::size_t k) {
  std::vector<std::int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](std::int32_t a, std::int32_t b) { return v[static_cast<std::size_t>(a)] > v[static_cast<std::size_t>(b)]; });
  idx.resize(k);
  return idx;
}

// Two references per model, both made on this machine kind (each golden's `cpu`):
//  - kPeer: tests/data/llm_parity (scripts/parity/make_llm_goldens.sh), a logit sample (the
//    top 64 + every 151st id);
//  - kShared: ../shared's goldens, the full logits row.
// Bars (issue 16): 1e-4 for f32 weights, 1e-3 for f16/bf16; top-5 and 32 greedy ids
// identical. Measured: 0 on every model.
// The scalar build (FUCINA_SCALAR) sums f32 GEMMs in another order than llama.cpp's AVX-512
// kernels, so there every bar is 2e-3 and greedy may part at a near-tie.
#if defined(FUCINA_SCALAR)
constexpr float kScalarTol = 2e-3f;
#else
constexpr float kScalarTol = 0.f;
#endif
constexpr float kF32Tol = 1e-4f, kF16Tol = 1e-3f;

enum class Reference { kPeer, kShared };

void check_model(const std::string& name, Reference ref, float tol_in, std::filesystem::path model_path = {}) {
  const float tol = std::max(tol_in, kScalarTol);
  const bool near_tie_ok = kScalarTol > 0.f;
  FUCINA_REQUIRE_SHARED(shared);
  const auto dir = shared / "models";
  const auto golden_path =
      ref == Reference::kShared ? dir / (name + ".golden.json") : test::test_data_dir() / "llm_parity" / (name + ".json");
  std::ifstream gf(golden_path);
  ASSERT_TRUE(gf) << "missing golden " << golden_path;
  const auto golden = nlohmann::json::parse(gf);
  const auto model = model::Model::load(model_path.empty() ? dir / (name + ".gguf") : model_path);
  const tokenizer::Tokenizer tok(tokenizer::load_tokenizer_data(model.file()));
  Context ctx({.threads = 2});
  int p = 0;
  for (const auto& cs : golden.at("cases")) {
    SCOPED_TRACE(name + " prompt " + std::to_string(p));
    const auto ids = cs.at("prompt_tokens").get<std::vector<std::int32_t>>();
    const auto prompt = cs.at("prompt").get<std::string>();
    EXPECT_EQ(tok.encode(prompt, {.add_special = true, .parse_special = true}), ids);

    auto cache = model.new_cache(256);
    const auto logits = model.prefill(ctx, cache, ids).to_vector();
    std::vector<std::pair<std::int32_t, float>> want;  // (id, logit)
    if (ref == Reference::kShared) {
      const auto row = read_f32(dir / cs.at("logits_file").get<std::string>());
      ASSERT_EQ(logits.size(), row.size());
      for (std::size_t i = 0; i < row.size(); ++i) want.emplace_back(static_cast<std::int32_t>(i), row[i]);
    } else {
      ASSERT_EQ(logits.size(), cs.at("n_vocab").get<std::size_t>());
      for (const auto& e : cs.at("logit_sample")) want.emplace_back(e.at(0).get<std::int32_t>(), e.at(1).get<float>());
    }
    float max_diff = 0.f;
    for (const auto& [i, v] : want) max_diff = std::max(max_diff, std::fabs(logits[static_cast<std::size_t>(i)] - v));
    std::vector<std::int32_t> want_top;
    for (const auto& e : cs.at("last_top5")) want_top.push_back(e.at(0).get<std::int32_t>());
    EXPECT_EQ(top_ids(logits, 5), want_top);
    EXPECT_LE(max_diff, tol);

    const auto greedy = cs.at("greedy").get<std::vector<std::int32_t>>();
    std::vector<std::int32_t> got;
    std::int32_t cur = top_ids(logits, 1)[0];
    int first_div = -1;
    float margin = 0.f, div_margin = 1e9f, prev_margin = 1e9f;
    for (std::size_t i = 0; i < greedy.size(); ++i) {
      got.push_back(cur);
      if (first_div < 0 && cur != greedy[i]) first_div = static_cast<int>(i), div_margin = prev_margin;
      if (i + 1 == greedy.size()) break;
      const std::int32_t next[1] = {cur};
      const auto l = model.forward(ctx, cache, next).to_vector();
      const auto t2 = top_ids(l, 2);
      if (first_div < 0) margin = std::min(i == 0 ? 1e9f : margin, l[static_cast<std::size_t>(t2[0])] - l[static_cast<std::size_t>(t2[1])]);
      prev_margin = l[static_cast<std::size_t>(t2[0])] - l[static_cast<std::size_t>(t2[1])];
      cur = t2[0];
    }
    if (near_tie_ok && first_div >= 0)
      EXPECT_LT(div_margin, tol) << "greedy diverges at step " << first_div << " where the top-2 margin is " << div_margin;
    else
      EXPECT_EQ(got, greedy) << "first divergence at step " << first_div;
    std::printf("[parity] %s vs %s p%d: %zu prompt tokens, max|dlogit| %.3g, top-5 %s, greedy %s (min top-2 margin %.3g)\n",
                name.c_str(), ref == Reference::kShared ? "shared golden" : "peer golden", p, ids.size(),
                static_cast<double>(max_diff), top_ids(logits, 5) == want_top ? "same" : "DIFFERENT",
                got == greedy ? "identical" : (first_div >= 0 ? ("diverges at step " + std::to_string(first_div)).c_str() : "?"),
                static_cast<double>(margin));
    ++p;
  }
}

}  // namespace

TEST(LlmParity, TinyLlamaSpmF32) { check_model("tiny-llama-spm-f32", Reference::kPeer, kF32Tol); }
TEST(LlmParity, TinyQwen3F16) { check_model("tiny-qwen3-f16", Reference::kPeer, kF16Tol); }
TEST(LlmParity, TinyQwen3MoeF16) { check_model("tiny-qwen3moe-f16", Reference::kPeer, kF16Tol); }
// BF16 weights: tiny-llama converted by our quantizer (byte-exact with llama-quantize).
TEST(LlmParity, TinyLlamaSpmBf16) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto tmp = std::filesystem::temp_directory_path() / ("fucina_bf16_" + std::to_string(::getpid()) + ".gguf");
  quant::QuantizeOptions opt;
  opt.ftype = quant::FileType::MostlyBF16;
  quant::quantize_model(shared / "models" / "tiny-llama-spm-f32.gguf", tmp, opt);
  check_model("tiny-llama-spm-bf16", Reference::kPeer, kF16Tol, tmp);
  std::filesystem::remove(tmp);
}
TEST(LlmParity, TinyLlamaSpmF32SharedGolden) { check_model("tiny-llama-spm-f32", Reference::kShared, kF32Tol); }
TEST(LlmParity, TinyQwen3F16SharedGolden) { check_model("tiny-qwen3-f16", Reference::kShared, kF16Tol); }
TEST(LlmParity, TinyQwen3MoeF16SharedGolden) { check_model("tiny-qwen3moe-f16", Reference::kShared, kF16Tol); }
