// Note [Streamed experts]: a qwen3moe model with its routed experts read from the file into a
// cache far smaller than them (fewer slots than one token uses, so experts are evicted every
// step) gives the resident path's logits bit for bit, for every weight format, for a prompt,
// for decode steps and for batched rows of several sequences; with and without the prefetch
// thread and with O_DIRECT. Bad options are clear errors. `synth --q4k-experts` (the
// benchmark's models) writes Q4_K experts with the matrices' mean and std.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "fucina/gguf/reader.hpp"
#include "fucina/model/expert_store.hpp"
#include "fucina/model/model.hpp"
#include "fucina/quant/k_quants.hpp"
#include "support/synth_model.hpp"
#include "support/temp_dir.hpp"

using namespace fucina;

namespace {

// 32 experts of 256x256 per layer, 4 used per token: K-quant rows (256 wide) really run.
model::SynthSpec moe_spec(DType dtype) {
  model::SynthSpec s = test::small_spec("qwen3moe", 256, 4, 1, dtype);
  s.n_expert = 32, s.n_expert_used = 4, s.n_ff_exp = 256, s.n_ctx = 256;
  return s;
}

model::SynthSpec q4k_experts_spec() {
  model::SynthSpec s = moe_spec(DType::f16);
  s.q4_k_experts = true;
  return s;
}

std::vector<test::SynthCase> cases() {
  return {
      {"f32", moe_spec(DType::f32)},
      {"f16", moe_spec(DType::f16)},
      {"bf16", moe_spec(DType::bf16)},
      {"q8_0", moe_spec(DType::f32), quant::FileType::MostlyQ8_0},
      {"q4_0", moe_spec(DType::f32), quant::FileType::MostlyQ4_0},
      {"q4_k_m", moe_spec(DType::f32), quant::FileType::MostlyQ4_K_M},  // Q4_K and Q6_K experts mixed
      {"q6_k", moe_spec(DType::f32), quant::FileType::MostlyQ6_K},
      {"synth_q4k_experts", q4k_experts_spec()},  // f16 attention, random Q4_K experts (synth --q4k-experts)
  };
}

std::vector<std::int32_t> tokens(std::int64_t n, std::int64_t vocab, std::int32_t salt) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 37 + salt * 11 + 5) % vocab);
  return t;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bytes of layer 0's largest expert (gate + up + down) in the file.
std::uint64_t expert_bytes(const std::filesystem::path& p) {
  const auto f = gguf::Reader::open(p);
  std::uint64_t b = 0;
  for (const char* n : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"})
    b += f.tensor(n).size_bytes / static_cast<std::uint64_t>(f.tensor(n).ne[2]);
  return b;
}

// Every logits row a solo prompt + greedy decode and a 3-sequence batched run give, in order.
std::vector<std::vector<float>> run(const model::Model& m) {
  Context ctx({.threads = 2});
  const std::int64_t vocab = m.config().n_vocab;
  std::vector<std::vector<float>> out;
  auto cache = m.new_cache(128);
  auto logits = m.forward(ctx, cache, tokens(24, vocab, 1)).to_vector();
  for (int step = 0; step < 6; ++step) {
    out.push_back(logits);
    const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = m.forward(ctx, cache, std::vector<std::int32_t>{next}).to_vector();
  }
  out.push_back(logits);
  auto paged = m.new_paged_cache(256, 128);
  std::vector<model::SeqId> seqs{paged.open(), paged.open(), paged.open()};
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<std::int32_t>> ids;
    for (std::size_t s = 0; s < seqs.size(); ++s)
      ids.push_back(tokens(step == 0 ? 5 + 7 * static_cast<std::int64_t>(s) : 1, vocab, 10 * step + static_cast<std::int32_t>(s)));
    std::vector<model::Model::SeqChunk> chunks;
    for (std::size_t s = 0; s < seqs.size(); ++s) chunks.push_back({seqs[s], ids[s]});
    out.push_back(m.forward_batch(ctx, paged, chunks).to_vector());
  }
  return out;
}

class MoeStream : public ::testing::TestWithParam<test::SynthCase> {};

TEST_P(MoeStream, LogitsAreTheResidentOnesBitForBit) {
  const test::SynthCase& c = GetParam();
  const auto path = test::make_synth_model(c, "moe_stream");
  const auto want = run(model::Model::load(path));
  // Three slots: fewer than the 4 experts one token uses, so every step evicts.
  const std::uint64_t cache = 3 * (expert_bytes(path) + 3 * 8192);
  struct Variant {
    const char* name;
    bool prefetch, direct;
  };
  for (const Variant v : {Variant{"prefetch", true, false}, Variant{"no prefetch", false, false}, Variant{"O_DIRECT", true, true}}) {
    SCOPED_TRACE(v.name);
    model::LoadOptions o;
    o.moe_stream = true, o.moe_cache_bytes = cache, o.moe_prefetch = v.prefetch, o.moe_direct_io = v.direct;
    const auto m = model::Model::load(path, o);
    const auto got = run(m);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << c.name << ": logits row set " << i;
    const auto s = m.weights().layers.front().expert_store->stats();
    EXPECT_LE(s.slots, 3);
    EXPECT_LT(s.slots, m.config().n_expert_used);
    // More reads than the model has experts: they were evicted and read again.
    EXPECT_GT(s.misses + s.prefetched, static_cast<std::uint64_t>(m.config().n_layer * m.config().n_expert));
    EXPECT_EQ(s.bytes_read % s.expert_bytes, 0u);
    if (!v.prefetch) {
      EXPECT_EQ(s.prefetched, 0u);
    }
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, MoeStream, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Note [Streamed experts] hot experts: one used three times survives 250 fetches of cold
// experts (the frequency term alone would keep it for 4 of an 8-slot cache's fetches), while a
// cold expert is evicted.
TEST(MoeStreamCache, HotExpertsArePinned) {
  const auto path = test::make_synth_model({"f32", moe_spec(DType::f32)}, "moe_stream_hot");
  model::LoadOptions o;
  o.moe_stream = true, o.moe_prefetch = false, o.moe_cache_bytes = 8 * (expert_bytes(path) + 3 * 8192);
  const auto m = model::Model::load(path, o);
  model::ExpertStore& store = *m.weights().layers.front().expert_store;
  ASSERT_EQ(store.stats().slots, 8);
  const std::int64_t n_expert = m.config().n_expert, keys = m.config().n_layer * n_expert;
  ASSERT_GT(keys, 32);
  const auto fetch = [&](std::int64_t key) { (void)store.fetch(key / n_expert, key % n_expert); };
  for (int i = 0; i < 3; ++i) fetch(0);
  for (int round = 0; round < 4; ++round)
    for (std::int64_t k = 1; k < keys; ++k) fetch(k);
  const auto before = store.stats();
  fetch(0);
  EXPECT_EQ(store.stats().hits, before.hits + 1) << "the hot expert was evicted";
  fetch(1);
  EXPECT_EQ(store.stats().misses, before.misses + 1) << "a cold expert stayed";
  std::filesystem::remove(path);
}

class MoeStreamErrors : public test::TempDirTest {
 protected:
  MoeStreamErrors() : TempDirTest("moe_stream") {}
};

TEST_F(MoeStreamErrors, TooSmallACacheOrADenseModelIsAClearError) {
  model::SynthSpec s = test::small_spec("qwen3moe", 64, 4, 2, DType::f32);
  model::write_synthetic_model(dir_ / "moe.gguf", s);
  model::LoadOptions o;
  o.moe_stream = true;
  o.moe_cache_bytes = 1024;  // one expert is 3 x 64 x 32 f32 = 24 KiB
  const std::string small = test::error_of([&] { (void)model::Model::load(dir_ / "moe.gguf", o); });
  EXPECT_NE(small.find("cannot hold one expert"), std::string::npos) << small;
  EXPECT_EQ(small.find('\n'), std::string::npos);

  s.arch = "qwen3";
  model::write_synthetic_model(dir_ / "dense.gguf", s);
  o.moe_cache_bytes = std::uint64_t{64} << 20;
  const std::string dense = test::error_of([&] { (void)model::Model::load(dir_ / "dense.gguf", o); });
  EXPECT_NE(dense.find("not a mixture-of-experts model"), std::string::npos) << dense;

  const std::string reader = test::error_of([&] {
    (void)model::Model::from_reader(gguf::Reader::open(dir_ / "moe.gguf"), o);
  });
  EXPECT_NE(reader.find("need a model file"), std::string::npos) << reader;
}

TEST_F(MoeStreamErrors, TheExpertRegionIsNotMapped) {
  model::write_synthetic_model(dir_ / "moe.gguf", test::small_spec("qwen3moe", 64, 4, 2, DType::f32));
  const auto f = gguf::Reader::open(dir_ / "moe.gguf", [](const gguf::TensorInfo& t) { return !model::is_routed_expert_tensor(t.name); });
  const auto whole = gguf::Reader::open(dir_ / "moe.gguf");
  std::size_t experts = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (model::is_routed_expert_tensor(t.name)) {
      ++experts;
      const std::string e = test::error_of([&] { (void)f.tensor_data(t); });
      EXPECT_NE(e.find("not mapped"), std::string::npos) << e;
    } else {  // the mapped tensors hold the file's bytes
      const auto a = f.tensor_data(t), b = whole.tensor_data(*whole.find_tensor(t.name));
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << t.name;
    }
  }
  EXPECT_EQ(experts, 6u);  // 2 layers x gate, up, down
  EXPECT_EQ(f.file_size(), whole.bytes().size());
}

}  // namespace

namespace {

TEST_F(MoeStreamErrors, SynthQ4kExpertsHaveTheMatricesStatistics) {
  model::write_synthetic_model(dir_ / "q4k.gguf", q4k_experts_spec());
  const auto f = gguf::Reader::open(dir_ / "q4k.gguf");
  for (const gguf::TensorInfo& t : f.tensors())
    EXPECT_EQ(t.type == gguf::GgmlType::Q4_K, model::is_routed_expert_tensor(t.name)) << t.name;
  const gguf::TensorInfo& gate = f.tensor("blk.1.ffn_gate_exps.weight");
  const auto n = gate.n_elements();
  std::vector<float> v(static_cast<std::size_t>(n));
  quant::dequantize_row_q4_K(reinterpret_cast<const quant::BlockQ4_K*>(f.tensor_data(gate).data()), v.data(), n);
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += static_cast<double>(x) * x;
  const double mean = sum / static_cast<double>(n), sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  const double want = 1.0 / 16;  // 1/sqrt(hidden 256)
  EXPECT_LT(std::fabs(mean), 0.01 * want);
  EXPECT_NEAR(sd, want, 0.02 * want);

  model::SynthSpec bad = q4k_experts_spec();
  bad.n_ff_exp = 100;
  const std::string e = test::error_of([&] { model::write_synthetic_model(dir_ / "bad.gguf", bad); });
  EXPECT_NE(e.find("multiples of 256"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.gguf"));
}

}  // namespace
