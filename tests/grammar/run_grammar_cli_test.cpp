// `fucina run --grammar/--grammar-file/--json-schema/--json-schema-file/--json` end to end on
// a random-weight model: the printed completion matches, bad grammars and schemas are one
// line and a non-zero exit, a cut by -n says `stop: length`. (tests/grammar/sampling_check.py
// validates many sampled outputs against their schemas with an independent validator.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fucina/model/synth.hpp"
#include "support/run_cli.hpp"

namespace {

using fucina::test::CliResult;
using fucina::test::expect_one_line_error;
using fucina::test::run_fucina;
using fucina::test::Capture;

class GrammarCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("fucina_grammar_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // One small layer, the built-in byte vocabulary: fast, and its byte tokens split UTF-8.
    fucina::model::write_synthetic_model(dir_ / "m.gguf", {.arch = "qwen3", .n_layer = 1, .n_ff = 128, .seed = 9, .vocab_from = {}});
    std::ofstream(dir_ / "yes_no.gbnf") << "# a comment\nroot ::= (\"yes\" | \"no\") \"!\"\n";
    std::ofstream(dir_ / "bad.gbnf") << "root ::= \"a\"\nitem ::= [a-z\n";
    std::ofstream(dir_ / "schema.json") << R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3}}, "required": ["n"]})";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  void SetUp() override { FUCINA_REQUIRE_CLI(); }

  static std::string run_args(const std::string& extra) {
    return fmt::format("run '{}' -p hi --temp 1 --top-k 0 --top-p 1 --min-p 0 {}", (dir_ / "m.gguf").string(), extra);
  }
  static std::string path(const char* name) { return fmt::format("'{}'", (dir_ / name).string()); }
  static inline std::filesystem::path dir_;
};


TEST_F(GrammarCli, GbnfOutputIsASentence) {
  for (int seed = 1; seed <= 6; ++seed) {
    const CliResult out = run_fucina(run_args(fmt::format("--seed {} -n 40 --grammar-file {}", seed, path("yes_no.gbnf"))), Capture::Stdout);
    ASSERT_EQ(out.status, 0);
    EXPECT_TRUE(out.output == "yes!" || out.output == "no!") << out.output;
    const std::string digits_args = run_args(fmt::format("--seed {} -n 40 --grammar '{}'", seed, "root ::= [0-9]{3}"));
    const CliResult digits = run_fucina(digits_args, Capture::Stdout);
    ASSERT_EQ(digits.status, 0);
    EXPECT_EQ(digits.output.size(), 3u) << digits.output;
    EXPECT_TRUE(std::all_of(digits.output.begin(), digits.output.end(), [](char c) { return c >= '0' && c <= '9'; }))
        << digits.output;
    EXPECT_NE(run_fucina(digits_args, Capture::Stderr).output.find("stop: eos"), std::string::npos);
  }
}

TEST_F(GrammarCli, JsonAndSchemaOutputsParse) {
  for (int seed = 1; seed <= 4; ++seed) {
    const CliResult s = run_fucina(run_args(fmt::format("--seed {} -n 120 --json-schema-file {}", seed, path("schema.json"))), Capture::Stdout);
    ASSERT_EQ(s.status, 0);
    const auto j = nlohmann::json::parse(s.output);
    ASSERT_TRUE(j.is_object()) << s.output;
    EXPECT_EQ(j.size(), 1u) << s.output;
    EXPECT_TRUE(j["n"].get<int>() >= 1 && j["n"].get<int>() <= 3) << s.output;
  }
  int complete = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const std::string args = run_args(fmt::format("--seed {} -n 200 --json", seed));
    if (run_fucina(args, Capture::Stderr).output.find("stop: eos") == std::string::npos) continue;
    const CliResult any = run_fucina(args, Capture::Stdout);
    EXPECT_TRUE(nlohmann::json::accept(any.output)) << any.output;
    ++complete;
  }
  EXPECT_GT(complete, 0);
}

TEST_F(GrammarCli, CutByMaxTokensSaysLength) {
  const CliResult r = run_fucina(run_args("--seed 1 -n 2 --grammar 'root ::= \"abcdefgh\"'"), Capture::Both);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("stop: length"), std::string::npos) << r.output;
}

TEST_F(GrammarCli, BadConstraintsAreOneLineErrors) {
  expect_one_line_error(run_fucina(run_args("--grammar-file " + path("bad.gbnf"))), 1,
                        "grammar: line 2, column 14: expected ']' to close the character class");
  expect_one_line_error(run_fucina(run_args("--grammar 'root ::= x'")), 1, "undefined rule 'x'");
  expect_one_line_error(run_fucina(run_args("--json-schema '{\"type\": \"strin\"}'")), 1, "unknown type 'strin'");
  expect_one_line_error(run_fucina(run_args("--json-schema '{\"type\": '")), 1, "not valid JSON");
  expect_one_line_error(run_fucina(run_args("--json --grammar 'root ::= \"a\"'")), 2, "--json and --grammar");
  expect_one_line_error(run_fucina(run_args("--grammar-file /nonexistent/g.gbnf")), 1, "cannot open '/nonexistent/g.gbnf'");
  expect_one_line_error(run_fucina(run_args("--json-schema")), 2, "--json-schema needs a value");
}

}  // namespace
