// Note [q8_0 KV cache] against llama.cpp with -ctk q8_0 -ctv q8_0 -fa on (goldens:
// scripts/parity/make_kv_q8_goldens.sh, tests/data/kv_q8): the last prompt position's
// logits (a sample of every 151st id and the top 5) and 32 greedy continuation ids, on the
// tiny qwen3 and qwen3moe models of ../shared. Measured when the goldens were made: the
// full logits row equal to llama.cpp's bit for bit on both (head size 32: one Q8_0 block per
// head row, so the dot's float order cannot differ); against the committed sample 4.8e-7 and
// 2.4e-7 (its top 5 are printed with 6 decimals); greedy identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fucina/model/model.hpp"
#include "support/shared_dir.hpp"

namespace {

using namespace fucina;

void check(const std::string& name) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto golden = nlohmann::json::parse(std::ifstream(test::test_data_dir() / "kv_q8" / (name + ".json")));
  Context ctx({.threads = 2});
  const auto m = model::Model::load(shared / "models" / (name + ".gguf"));
  auto cache = m.new_cache(256, model::KvType::q8_0);
  const auto ids = golden.at("prompt_tokens").get<std::vector<std::int32_t>>();
  auto logits = m.forward(ctx, cache, ids).to_vector();
  float worst = 0.f;
  for (const auto& s : golden.at("logit_sample"))
    worst = std::max(worst, std::fabs(logits[s[0].get<std::size_t>()] - s[1].get<float>()));
  for (const auto& s : golden.at("last_top5"))
    worst = std::max(worst, std::fabs(logits[s[0].get<std::size_t>()] - s[1].get<float>()));
  EXPECT_LE(worst, 1e-4f) << name;
  std::printf("[ measured ] %s, q8_0 KV: max |fucina - llama.cpp| over the logit sample = %.3g\n", name.c_str(),
              static_cast<double>(worst));
  const auto greedy = golden.at("greedy").get<std::vector<std::int32_t>>();
  for (std::size_t i = 0; i < greedy.size(); ++i) {
    const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(next, greedy[i]) << name << ": greedy token " << i;
    const std::int32_t one[1] = {next};
    logits = m.forward(ctx, cache, one).to_vector();
  }
}

TEST(KvQ8Parity, Qwen3MatchesLlamaCpp) { check("tiny-qwen3-f16"); }
TEST(KvQ8Parity, Qwen3MoeMatchesLlamaCpp) { check("tiny-qwen3moe-f16"); }

}  // namespace
