// `fucina finetune` end to end (tests/data/finetune/finetune.json): a synthetic model learns 16
// made-up question/answer pairs, as a LoRA adapter and by full training; `fucina run` then
// prints the trained answers, and the same bytes llama.cpp printed for the adapter, the merged
// and Q8_0-quantized adapter, the trained model and its Q8_0 copy (goldens.json, made with
// llama-server by scripts/parity/make_finetune_goldens.py). Ctrl-C saves a checkpoint and
// --resume finishes the run with the uninterrupted run's bytes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "quantize/sha256.hpp"
#include "support/run_cli.hpp"

using fucina::test::Capture;
using fucina::test::run_fucina;
using fucina::test::shell_quote;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(FUCINA_TEST_DATA) / "finetune";

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string sha256(const fs::path& p) {
  const std::string s = read_file(p);
  return fucina::test::sha256_hex(std::as_bytes(std::span(s.data(), s.size())));
}

std::string join(const json& flags) {
  std::string s;
  for (const auto& f : flags) {
    s.push_back(' ');  // (not " " + shell_quote(...): GCC 12 warns falsely on it, -Wrestrict)
    s += shell_quote(f.get<std::string>());
  }
  return s;
}

class FinetuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    FUCINA_REQUIRE_CLI();
    dir_ = fs::temp_directory_path() / ("fucina_finetune_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    spec_ = read_json(kData / "finetune.json");
    golden_ = read_json(kData / "goldens.json");
    std::ifstream qa(kData / "qa.jsonl");
    for (std::string line; std::getline(qa, line);)
      if (!line.empty()) qa_.push_back(json::parse(line));
    ASSERT_EQ(run_fucina("synth " + p("base.gguf") + join(spec_.at("synth"))).status, 0);
    ASSERT_EQ(sha256(dir_ / "base.gguf"), golden_.at("sha256").at("base").get<std::string>());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string p(const std::string& name) const { return shell_quote((dir_ / name).string()); }

  // Trains and returns the last step's loss.
  double finetune(const std::string& out, const std::string& mode, const std::string& extra = "") {
    const auto r = run_fucina("finetune " + p("base.gguf") + " --data " + shell_quote((kData / "qa.jsonl").string()) + " -o " +
                              p(out) + join(spec_.at(mode)) + extra);
    EXPECT_EQ(r.status, 0) << r.output;
    std::smatch m;
    const std::regex loss("loss [0-9.]+ -> ([0-9.]+)");
    EXPECT_TRUE(std::regex_search(r.output, m, loss)) << r.output;
    return m.empty() ? 1e9 : std::stod(m[1]);
  }

  // fucina run at temperature 0 on every question prints llama.cpp's bytes (golden `which`),
  // which are the trained answers.
  void expect_answers(const std::string& model, const std::string& which, const std::string& extra = "") {
    const auto& want = golden_.at("outputs").at(which);
    ASSERT_EQ(want.size(), qa_.size());
    for (std::size_t i = 0; i < qa_.size(); ++i) {
      const std::string prompt = qa_[i].at("prompt");
      const auto r = run_fucina("run " + p(model) + extra + " --temp 0 -n " + std::to_string(spec_.at("n_predict").get<int>()) +
                                    " -t 2 -p " + shell_quote(prompt),
                                Capture::Stdout);
      ASSERT_EQ(r.status, 0);
      EXPECT_EQ(r.output, want[i].get<std::string>()) << which << ": " << prompt;
      EXPECT_EQ(r.output, qa_[i].at("completion").get<std::string>()) << which << ": not the trained answer";
    }
  }

  // A trained file other than the golden run's (another CPU's rounding) is noted, not failed:
  // its answers are still checked.
  void note_sha(const std::string& file, const std::string& key) {
    if (sha256(dir_ / file) != golden_.at("sha256").at(key).get<std::string>())
      std::printf("note: %s differs from the golden run's (made on %s)\n", file.c_str(),
                  golden_.at("cpu").get<std::string>().c_str());
  }

  fs::path dir_;
  json spec_, golden_;
  std::vector<json> qa_;
};

TEST_F(FinetuneCli, LoraLearnsTheAnswersAndLlamaCppAgrees) {
  EXPECT_LT(finetune("lora.gguf", "lora"), 0.1);
  note_sha("lora.gguf", "lora");
  expect_answers("base.gguf", "lora", " --lora " + p("lora.gguf"));
  ASSERT_EQ(run_fucina("export-lora " + p("base.gguf") + " --lora " + p("lora.gguf") + " -o " + p("merged.gguf")).status, 0);
  ASSERT_EQ(run_fucina("quantize " + p("merged.gguf") + " " + p("merged-q8_0.gguf") + " Q8_0").status, 0);
  note_sha("merged-q8_0.gguf", "merged-q8_0");
  expect_answers("merged-q8_0.gguf", "merged-q8_0");
}

TEST_F(FinetuneCli, FullTrainingLearnsTheAnswersAndLlamaCppAgrees) {
  EXPECT_LT(finetune("full.gguf", "full"), 0.1);
  note_sha("full.gguf", "full");
  expect_answers("full.gguf", "full");
  ASSERT_EQ(run_fucina("quantize " + p("full.gguf") + " " + p("full-q8_0.gguf") + " Q8_0").status, 0);
  expect_answers("full-q8_0.gguf", "full-q8_0");
}

TEST_F(FinetuneCli, InterruptSavesACheckpointAndResumeIsBitExact) {
  finetune("whole.gguf", "lora");
  // The same run, interrupted with SIGINT once it has printed a few steps.
  const std::string cmd = fucina::test::cli_path().string() + " finetune " + (dir_ / "base.gguf").string() + " --data " +
                          (kData / "qa.jsonl").string() + " -o " + (dir_ / "cut.gguf").string();
  std::vector<std::string> argv_s;
  for (std::istringstream in(cmd); !in.eof();) {
    std::string w;
    in >> w;
    if (!w.empty()) argv_s.push_back(w);
  }
  for (const auto& f : spec_.at("lora")) argv_s.push_back(f);
  int err[2];
  ASSERT_EQ(::pipe(err), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err[1], 2);
    ::close(err[0]);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err[1]);
  std::string seen;
  char buf[256];
  bool sent = false;
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) {
    seen.append(buf, static_cast<std::size_t>(n));
    if (!sent && seen.find("step 20/") != std::string::npos) ::kill(pid, SIGINT), sent = true;
  }
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(sent) << seen;
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 130) << seen;
  EXPECT_NE(seen.find("checkpoint saved"), std::string::npos) << seen;
  EXPECT_FALSE(fs::exists(dir_ / "cut.gguf")) << "an interrupted run wrote its output";
  ASSERT_TRUE(fs::exists(dir_ / "cut.gguf.checkpoint" / "finetune.state"));

  finetune("cut.gguf", "lora", " --resume");
  EXPECT_EQ(read_file(dir_ / "cut.gguf"), read_file(dir_ / "whole.gguf")) << "the resumed run's adapter differs";
}

TEST_F(FinetuneCli, BadInputIsAClearError) {
  const std::string base = "finetune " + p("base.gguf") + " ";
  const auto no_data = run_fucina(base + "-o " + p("x.gguf"));
  EXPECT_EQ(no_data.status, 2);
  EXPECT_NE(no_data.output.find("--data"), std::string::npos) << no_data.output;
  std::ofstream(dir_ / "bad.jsonl") << "{\"text\": \"fine\"}\n{\"prompt\": 3}\n";
  const auto bad = run_fucina(base + "--data " + p("bad.jsonl") + " -o " + p("x.gguf"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("bad.jsonl:2"), std::string::npos) << bad.output;
  const auto target = run_fucina(base + "--data " + shell_quote((kData / "qa.jsonl").string()) + " -o " + p("x.gguf") +
                                 " --lora --lora-targets q,zz");
  EXPECT_NE(target.status, 0);
  EXPECT_NE(target.output.find("zz"), std::string::npos) << target.output;
  const auto same = run_fucina(base + "--data " + shell_quote((kData / "qa.jsonl").string()) + " -o " + p("base.gguf"));
  EXPECT_NE(same.status, 0);
  EXPECT_EQ(sha256(dir_ / "base.gguf"), golden_.at("sha256").at("base").get<std::string>()) << "the base was overwritten";
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

}  // namespace
