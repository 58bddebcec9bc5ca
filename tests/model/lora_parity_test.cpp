// fucina export-lora against llama-export-lora's goldens (tests/data/lora/export_goldens.json,
// made by scripts/parity/make_lora_goldens.py): the inputs are regenerated here with the
// library (synthetic base, random adapters through write_lora), their bytes checked against
// the recorded sha256, merged by model::export_lora and compared tensor by tensor.
// A second test runs llama.cpp itself when the peer is built: llama-completion --lora loads
// our adapter file and prints what it prints on fucina's merge.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "fucina/gguf/reader.hpp"
#include "fucina/model/lora.hpp"
#include "fucina/model/lora_merge.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/quant/quantize_model.hpp"
#include "quantize/sha256.hpp"
#include "support/run_cli.hpp"
#include "support/shared_dir.hpp"

namespace fs = std::filesystem;
namespace fm = fucina::model;
using nlohmann::json;

namespace {

std::string sha256_bytes(fucina::gguf::Bytes b) {
  fucina::test::Sha256 h;
  h.update(b);
  return h.hex();
}

std::string sha256_file(const fs::path& p) { return sha256_bytes(fucina::gguf::Reader::open(p).bytes()); }

json load_goldens() {
  std::ifstream f(fucina::test::test_data_dir() / "lora" / "export_goldens.json");
  if (!f) throw std::runtime_error("cannot open tests/data/lora/export_goldens.json");
  return json::parse(f);
}

class LoraGoldens : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("fucina_lora_parity_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Inputs {
    fs::path base;
    std::vector<fs::path> adapter_paths;
    std::vector<fm::ScaledLora> adapters;
  };

  // The case's base model and adapters, as make_lora_goldens.py made them with the CLI.
  Inputs make_inputs(const json& c) {
    const json& b = c.at("base");
    fm::SynthSpec spec;
    spec.arch = b.at("arch");
    spec.n_embd = b.at("hidden");
    spec.n_layer = b.at("layers");
    spec.n_head = b.at("heads");
    spec.n_head_kv = b.at("kv_heads");
    spec.n_ff = b.at("ffn");
    spec.dtype = b.at("dtype") == "f16" ? fucina::DType::f16 : fucina::DType::f32;
    spec.seed = b.at("seed");
    const std::string name = c.at("name");
    Inputs in;
    in.base = dir_ / fmt::format("{}.gguf", name);
    fm::write_synthetic_model(in.base, spec);
    if (b.contains("quantize")) {
      fucina::quant::QuantizeOptions qo;
      qo.ftype = fucina::quant::find_quantize_target(b.at("quantize").get<std::string>())->ftype;
      const fs::path q = dir_ / fmt::format("{}.q.gguf", name);
      fucina::quant::quantize_model(in.base, q, qo);
      in.base = q;
    }
    EXPECT_EQ(sha256_file(in.base), c.at("base_sha256").get<std::string>()) << name << ": base bytes changed";
    const auto base = fucina::gguf::Reader::open(in.base);
    for (std::size_t i = 0; i < c.at("adapters").size(); ++i) {
      const json& a = c.at("adapters")[i];
      fm::RandomLoraSpec rs;
      rs.rank = a.at("rank");
      rs.alpha = a.at("alpha");
      rs.targets = a.at("targets");
      rs.seed = a.at("seed");
      const fs::path p = dir_ / fmt::format("{}.lora{}.gguf", name, i);
      fm::write_lora(p, fm::random_lora(base, rs));
      EXPECT_EQ(sha256_file(p), c.at("adapter_sha256")[i].get<std::string>()) << name << ": adapter bytes changed";
      in.adapter_paths.push_back(p);
      in.adapters.push_back({fm::read_lora(p), a.at("scale").get<float>()});
    }
    return in;
  }

  fs::path dir_;
};

TEST_F(LoraGoldens, ExportLoraTensorsAreLlamaExportLoras) {
  const json g = load_goldens();
  ASSERT_GE(g.at("cases").size(), 4u);
  for (const json& c : g.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const Inputs in = make_inputs(c);
    fm::LoraMergeOptions opt;
    opt.n_threads = 2;
    if (c.contains("fucina_type")) opt.type = fucina::quant::find_quantize_target(c.at("fucina_type").get<std::string>());
    const fs::path out = dir_ / fmt::format("{}.merged.gguf", name);
    const auto stats = fm::export_lora(in.base, in.adapter_paths, in.adapters, out, opt);

    std::set<std::string> merged;
    for (const auto& s : in.adapters)
      for (const auto& m : s.adapter.matrices) merged.insert(m.target);
    EXPECT_EQ(stats.n_merged, merged.size());
    const auto r = fucina::gguf::Reader::open(out);
    const json& tensors = c.at("tensors");
    ASSERT_EQ(r.tensors().size(), tensors.size());
    const bool all = c.at("compare") == "all";
    int compared = 0;
    for (const auto& t : r.tensors()) {
      const std::string tn(t.name);
      ASSERT_TRUE(tensors.contains(tn)) << tn;
      if (!all && !merged.count(tn)) continue;
      EXPECT_EQ(sha256_bytes(r.tensor_data(t)), tensors.at(tn).get<std::string>()) << tn << " differs from llama-export-lora's";
      ++compared;
    }
    EXPECT_EQ(compared, all ? static_cast<int>(tensors.size()) : static_cast<int>(merged.size()));
  }
}

// llama.cpp loads the adapter files write_lora makes: llama-completion --lora prints the same
// greedy text as on fucina's merge, and the golden's (so also as when it was recorded).
TEST_F(LoraGoldens, LlamaCompletionLoadsOurAdapters) {
  FUCINA_REQUIRE_CLI();
  const char* env = std::getenv("FUCINA_LLAMA_BIN");
  const fs::path bin = env ? fs::path(env) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache/fucina-peers/llama.cpp/build/bin";
  if (!fs::exists(bin / "llama-completion"))
    GTEST_SKIP() << "llama.cpp peer not built at " << bin << " (set FUCINA_LLAMA_BIN); skipping";
  const json g = load_goldens();
  const json& c = g.at("cases")[0];
  const Inputs in = make_inputs(c);
  // llama-completion's stdout (the prompt and the generated text) as hex; its log is dropped.
  // llama-completion prints through common_log's worker thread, which at exit sometimes
  // loses the tail of stdout (seen: 3 runs in 12 cut short, always a prefix). So each
  // completion runs kRuns times and the longest is kept; every shorter one must be a prefix
  // of it, so a real difference between runs still fails. No early stop: cut runs lose the
  // same tail, so two equal runs in a row can both be short (a clean-clone CI run failed so).
  constexpr int kRuns = 5;
  const fs::path text = dir_ / "completion.txt";
  const auto complete = [&](const std::string& extra) {
    std::vector<std::string> runs;
    for (int i = 0; i < kRuns; ++i) {
      const auto r = fucina::test::run_cli(fmt::format(
          "('{}' {} -p '{}' -n {} --temp 0 -no-cnv -t 2 --no-warmup --seed 1 > '{}' 2>/dev/null)",
          (bin / "llama-completion").string(), extra, g.at("prompt").get<std::string>(), g.at("n_predict").get<int>(),
          text.string()));
      EXPECT_EQ(r.status, 0) << r.output;
      std::ifstream f(text, std::ios::binary);
      std::string hex;
      for (char ch; f.get(ch);) hex += fmt::format("{:02x}", static_cast<unsigned char>(ch));
      runs.push_back(std::move(hex));
    }
    const std::string longest = *std::max_element(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.size() < b.size(); });
    for (const auto& r : runs) EXPECT_EQ(longest.rfind(r, 0), 0u) << "llama-completion runs differ: " << r << " vs " << longest;
    return longest;
  };
  const fs::path merged = dir_ / "merged.gguf";
  const auto m = fucina::test::run_fucina(
      fmt::format("export-lora '{}' --lora '{}' -o '{}'", in.base.string(), in.adapter_paths[0].string(), merged.string()));
  ASSERT_EQ(m.status, 0) << m.output;
  const std::string with_lora = complete(fmt::format("-m '{}' --lora '{}'", in.base.string(), in.adapter_paths[0].string()));
  EXPECT_EQ(with_lora, c.at("completion_with_lora_hex").get<std::string>());
  EXPECT_EQ(with_lora, complete(fmt::format("-m '{}'", merged.string())));
  EXPECT_NE(with_lora, complete(fmt::format("-m '{}'", in.base.string()))) << "the adapter changed nothing";
}

}  // namespace
