// Logit parity with llama.cpp along the whole greedy path, on synthetic models the project
// makes itself (tests/data/llm_parity/synth_matrix.json: head sizes 16-128, GQA ratios 1-5,
// f32/f16/bf16, dense and MoE). Goldens: scripts/parity/make_decode_goldens.sh, on the
// machine named in each golden. For every prompt the model is fed llama.cpp's own greedy
// tokens (teacher forcing, so one near-tie cannot derail the rest) and every step's logits
// (top 16 and a sample) must be within the model's tolerance: 1e-4 for f32 weights, 1e-3
// for f16/bf16. The prompts take each of llama.cpp's attention paths: one-row flash
// attention for short prompts and decode, the tiled path for >= 64 prompt rows, and the
// KV range split over threads once decode passes 256 positions. FUCINA_PARITY_STEPS=1
// prints every step's worst difference (to find where a regression starts).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fucina/model/model.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "quantize/sha256.hpp"
#include "support/run_cli.hpp"
#include "support/shared_dir.hpp"

using namespace fucina;

namespace {

using fucina::test::shell_quote;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("missing " + p.string());
  return nlohmann::json::parse(f);
}

std::string file_sha256(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return test::sha256_hex(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

std::string hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

const nlohmann::json& matrix() {
  static const nlohmann::json m = read_json(test::test_data_dir() / "llm_parity" / "synth_matrix.json");
  return m;
}

// The model of the matrix entry `name`, made by this tree's `fucina synth`; it must be the
// very file the goldens were made from.
std::filesystem::path make_model(const std::filesystem::path& dir, const nlohmann::json& spec, const nlohmann::json& golden) {
  const auto path = dir / (spec.at("name").get<std::string>() + ".gguf");
  std::string cmd = fmt::format("{} synth {}", shell_quote(test::cli_path().string()), shell_quote(path.string()));
  for (const auto& f : spec.at("flags")) cmd += fmt::format(" {}", shell_quote(f.get<std::string>()));
  const auto r = test::run_cli(cmd);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(file_sha256(path), golden.at("sha256").get<std::string>())
      << "fucina synth no longer writes the file the goldens were made from: regenerate them "
         "(scripts/parity/make_decode_goldens.sh) if the change is intended";
  return path;
}

class DecodeParity : public ::testing::TestWithParam<std::string> {
 protected:
  struct Case {
    nlohmann::json spec, golden;
    std::filesystem::path model;
  };
  void SetUp() override {
    if (!std::filesystem::exists(test::cli_path())) GTEST_SKIP() << "CLI not built at " << test::cli_path();
  }
  // The matrix entry GetParam(), its goldens, and its model made by this tree's synth.
  Case load_case() const {
    const auto& models = matrix().at("models");
    const auto it = std::find_if(models.begin(), models.end(), [&](const nlohmann::json& s) { return s.at("name") == GetParam(); });
    if (it == models.end()) {
      ADD_FAILURE() << "no entry " << GetParam() << " in synth_matrix.json";
      return {};
    }
    Case c{*it, read_json(test::test_data_dir() / "llm_parity" / (GetParam() + ".decode.json")), {}};
    c.model = make_model(dir_, c.spec, c.golden);
    return c;
  }
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("fucina_decode_parity_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static inline std::filesystem::path dir_;
};

TEST_P(DecodeParity, LogitsAlongTheGreedyPathMatchLlamaCpp) {
  const Case c = load_case();
  if (HasFailure()) return;
  const auto& golden = c.golden;
  const auto& path = c.model;
  const float tol = c.spec.at("tol").get<float>();

  const auto model = model::Model::load(path);
  const tokenizer::Tokenizer tok(tokenizer::load_tokenizer_data(model.file()));
  Context ctx({.threads = golden.at("cases").at(0).at("threads").get<int>()});
  int p = 0;
  for (const auto& cs : golden.at("cases")) {
    SCOPED_TRACE(fmt::format("{} prompt {}", GetParam(), p));
    const auto prompt = cs.at("prompt").get<std::string>();
    const auto ids = cs.at("prompt_tokens").get<std::vector<std::int32_t>>();
    ASSERT_EQ(tok.encode(prompt, {.add_special = true, .parse_special = true}), ids);
    const auto greedy = cs.at("greedy").get<std::vector<std::int32_t>>();
    const auto& steps = cs.at("steps");
    ASSERT_EQ(steps.size(), greedy.size());

    auto cache = model.new_cache(cs.at("n_ctx").get<std::int64_t>());
    auto logits = model.prefill(ctx, cache, ids).to_vector();
    float worst = 0.f;
    int near_ties = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      SCOPED_TRACE(fmt::format("step {} (position {})", s, ids.size() + s - 1));
      ASSERT_EQ(logits.size(), cs.at("n_vocab").get<std::size_t>());
      for (const char* part : {"top", "sample"})
        for (const auto& e : steps[s].at(part)) {
          const auto id = e.at(0).get<std::size_t>();
          const float d = std::fabs(logits[id] - e.at(1).get<float>());
          worst = std::max(worst, d);
          EXPECT_LE(d, tol) << "logit of id " << id;
        }
      // Our argmax is llama.cpp's greedy token unless its own top-2 margin is within tol.
      const auto& top = steps[s].at("top");
      const float margin = top.at(0).at(1).get<float>() - top.at(1).at(1).get<float>();
      const auto ours = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (ours != greedy[s]) {
        ++near_ties;
        EXPECT_LT(margin, 2 * tol) << "argmax " << ours << " vs llama.cpp's " << greedy[s];
      }
      if (std::getenv("FUCINA_PARITY_STEPS")) {
        float w = 0.f;
        for (const auto& e : steps[s].at("top")) w = std::max(w, std::fabs(logits[e.at(0).get<std::size_t>()] - e.at(1).get<float>()));
        std::printf("  step %zu: max|d| top16 %.3g\n", s, static_cast<double>(w));
      }
      if (s + 1 == steps.size()) break;
      const std::int32_t next[1] = {greedy[s]};
      logits = model.forward(ctx, cache, next).to_vector();
    }
    std::printf("[decode parity] %s p%d: %zu prompt tokens, %zu steps, max|dlogit| %.3g (tol %.0e), argmax near-ties %d\n",
                GetParam().c_str(), p, ids.size(), steps.size(), static_cast<double>(worst), static_cast<double>(tol), near_ties);
    ++p;
  }
}

// What the user sees: `fucina run --temp 0` prints exactly llama.cpp's greedy bytes
// (token_to_piece concatenation, up to an end-of-generation token, where llama-completion
// stops too), and with --echo the prompt before them.
TEST_P(DecodeParity, RunPrintsLlamaCppsGreedyBytes) {
  const Case c = load_case();
  if (HasFailure()) return;
  const auto& golden = c.golden;
  const auto& path = c.model;
  const auto model = model::Model::load(path);
  const tokenizer::Tokenizer tok(tokenizer::load_tokenizer_data(model.file()));
  int p = 0;
  for (const auto& cs : golden.at("cases")) {
    SCOPED_TRACE(fmt::format("{} prompt {}", GetParam(), p++));
    std::string want;
    const auto greedy = cs.at("greedy").get<std::vector<std::int32_t>>();
    for (std::size_t i = 0; i < greedy.size() && !tok.is_eog(greedy[i]); ++i)
      want += cs.at("greedy_pieces_hex").at(i).get<std::string>();
    const auto prompt = cs.at("prompt").get<std::string>();
    const auto prompt_file = dir_ / "prompt.txt";
    std::ofstream(prompt_file, std::ios::binary) << prompt;
    const std::string cmd = fmt::format("({} run {} -f {} --temp 0 -n {} -t {} -c {} {{}} 2>/dev/null)", shell_quote(test::cli_path().string()),
                                        shell_quote(path.string()), shell_quote(prompt_file.string()),
                                        cs.at("greedy").size(), cs.at("threads").get<int>(), cs.at("n_ctx").get<int>());
    const auto plain = test::run_cli(fmt::format(fmt::runtime(cmd), ""));
    ASSERT_EQ(plain.status, 0);
    EXPECT_EQ(hex(plain.output), want);
    const auto echoed = test::run_cli(fmt::format(fmt::runtime(cmd), "--echo"));
    ASSERT_EQ(echoed.status, 0);
    EXPECT_EQ(hex(echoed.output), hex(prompt) + want);
  }
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& s : matrix().at("models")) names.push_back(s.at("name").get<std::string>());
  return names;
}

INSTANTIATE_TEST_SUITE_P(SynthMatrix, DecodeParity, ::testing::ValuesIn(model_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
