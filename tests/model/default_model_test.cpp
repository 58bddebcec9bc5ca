// The shipped default model, models/fucina-default.gguf (docs/DEFAULT-MODEL.md), against what
// llama.cpp makes of it (tests/data/default-model/goldens.json, made on the machine it names by
// scripts/parity/make_default_model_goldens.py): the same token ids for held-out text, the same
// printed perplexity, the same greedy text for three prompts; and `fucina run` with no model
// runs it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "quantize/sha256.hpp"
#include "support/run_cli.hpp"

using fucina::test::run_fucina;
using fucina::test::shell_quote;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(FUCINA_TEST_DATA) / "default-model";
const fs::path kModel = fs::path(FUCINA_TEST_DATA).parent_path().parent_path() / "models" / "fucina-default.gguf";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The numbers of a printed perplexity line, in order.
std::vector<double> numbers(const std::string& line) {
  std::vector<double> out;
  const std::regex num(R"((\d+\.\d+))");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), num); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

class DefaultModel : public ::testing::Test {
 protected:
  void SetUp() override {
    FUCINA_REQUIRE_CLI();
    ASSERT_TRUE(fs::is_regular_file(kModel)) << kModel << " is missing: the default model is part of the tree";
    golden_ = json::parse(read_file(kData / "goldens.json"));
    const std::string bytes = read_file(kModel);
    same_model_ = fucina::test::sha256_hex(std::as_bytes(std::span(bytes.data(), bytes.size()))) ==
                  golden_.at("model_sha256").get<std::string>();
  }
  std::string model() const { return shell_quote(kModel.string()); }

  json golden_;
  bool same_model_ = false;
};

TEST_F(DefaultModel, IsSmallEnoughToShip) { EXPECT_LE(fs::file_size(kModel), std::uintmax_t{20} << 20); }

TEST_F(DefaultModel, TokenizesHeldOutTextAsLlamaCpp) {
  if (!same_model_) GTEST_SKIP() << "models/fucina-default.gguf is not the file the goldens were made from";
  const auto r = run_fucina("tokenize " + model() + " -f " + shell_quote((kData / "val-sample.txt").string()) +
                                " --no-parse-special",
                            fucina::test::Capture::Stdout);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json::parse(r.output), golden_.at("llama_tokenize_ids"));
}

// llama-perplexity's protocol and printed lines (Note [Perplexity protocol]); the numbers agree
// to 1e-4 relative (the goldens' machine prints the same digits; another CPU's f16 rounding may
// move the last ones), far inside the issue's 0.5%.
TEST_F(DefaultModel, PerplexityAgreesWithLlamaPerplexity) {
  if (!same_model_) GTEST_SKIP() << "models/fucina-default.gguf is not the file the goldens were made from";
  const auto& want = golden_.at("perplexity");
  const auto r = run_fucina("perplexity " + model() + " -f " + shell_quote((kData / "val-sample.txt").string()) +
                                " -c " + std::to_string(want.at("ctx").get<int>()) + " -t 2",
                            fucina::test::Capture::Stdout);
  ASSERT_EQ(r.status, 0) << r.output;
  std::smatch chunks, final_line;
  ASSERT_TRUE(std::regex_search(r.output, chunks, std::regex(R"(\[1\][^\n]*,)"))) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, final_line, std::regex(R"(Final estimate: PPL = [^\n]*)"))) << r.output;
  for (const auto& [got, expected] : {std::pair{chunks.str(), want.at("chunks").get<std::string>()},
                                      std::pair{final_line.str(), want.at("final").get<std::string>()}}) {
    const auto g = numbers(got), e = numbers(expected);
    ASSERT_EQ(g.size(), e.size()) << got << "\nvs llama-perplexity\n" << expected;
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-4 * e[i]) << got << "\nvs\n" << expected;
  }
}

TEST_F(DefaultModel, GreedyTextEqualsLlamaCpp) {
  if (!same_model_) GTEST_SKIP() << "models/fucina-default.gguf is not the file the goldens were made from";
  const auto& prompts = golden_.at("prompts");
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto r = run_fucina("run " + model() + " --temp 0 -t 2 -n " + std::to_string(golden_.at("n_predict").get<int>()) +
                                  " -p " + shell_quote(prompts[i].get<std::string>()),
                              fucina::test::Capture::Stdout);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, golden_.at("greedy")[i].get<std::string>()) << prompts[i];
  }
}

// Note [Default model lookup]: with no model, `fucina run` runs the tree's default model and
// says so; $FUCINA_MODEL overrides it, and a wrong $FUCINA_MODEL is an error, not a fallback.
TEST_F(DefaultModel, RunWithoutAModelUsesIt) {
  const std::string args = " --temp 0 -t 2 -n 12 -p 'The whale'";
  const auto named = run_fucina("run " + model() + args, fucina::test::Capture::Stdout);
  const auto implicit = run_fucina("run" + args, fucina::test::Capture::Stdout);
  ASSERT_EQ(named.status, 0) << named.output;
  ASSERT_EQ(implicit.status, 0) << implicit.output;
  EXPECT_EQ(implicit.output, named.output);
  EXPECT_FALSE(named.output.empty());
  const auto said = run_fucina("run" + args, fucina::test::Capture::Stderr);
  EXPECT_NE(said.output.find("using the default model"), std::string::npos) << said.output;
  EXPECT_NE(said.output.find("fucina-default.gguf"), std::string::npos) << said.output;

  const auto wrong = fucina::test::run_cli("FUCINA_MODEL=/nonexistent/m.gguf " + shell_quote(fucina::test::cli_path().string()) +
                                           " run" + args);
  EXPECT_NE(wrong.status, 0);
  EXPECT_NE(wrong.output.find("/nonexistent/m.gguf"), std::string::npos) << wrong.output;
}

}  // namespace
