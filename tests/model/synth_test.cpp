// Synthetic models (fucina/model/synth.hpp): the normal stream against a double-precision
// Box-Muller reference and the normal law, files that load and run, the spec read back,
// weight statistics, determinism across runs and thread counts, the dtype being only a
// rounding, the built-in vocabulary against llama.cpp's tokenizer, and llama.cpp's logits
// on generated files (goldens from llama-oracle / llama-tokenize, see each test).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/model/model.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/tokenizer/tokenizer_data.hpp"
#include "support/shared_dir.hpp"

using namespace fucina;
using namespace fucina::model;

namespace {

class Synth : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fucina_synth_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const SynthSpec& s, const std::string& name, int threads = 2) {
    const auto p = dir_ / name;
    ThreadPool pool(threads);
    write_synthetic_model(p, s, pool);
    return p;
  }
  std::filesystem::path dir_;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<float> floats(const gguf::Reader& r, const gguf::TensorInfo& t) {
  const auto b = r.tensor_data(t);
  std::vector<float> v(static_cast<std::size_t>(t.n_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t h = 0;
    switch (t.type) {
      case gguf::GgmlType::F32: std::memcpy(&v[i], b.data() + 4 * i, 4); break;
      case gguf::GgmlType::F16: std::memcpy(&h, b.data() + 2 * i, 2), v[i] = half_to_float(h); break;
      case gguf::GgmlType::BF16: std::memcpy(&h, b.data() + 2 * i, 2), v[i] = bf16_to_float(h); break;
      default: ADD_FAILURE() << "unexpected type"; return {};
    }
  }
  return v;
}

struct Moments {
  double mean = 0, sd = 0;
};
Moments moments(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  const double m = s / static_cast<double>(v.size());
  for (float x : v) s2 += (x - m) * (x - m);
  return {m, std::sqrt(s2 / static_cast<double>(v.size()))};
}

std::vector<std::int32_t> top_ids(const std::vector<float>& l, std::size_t k) {
  std::vector<std::int32_t> idx(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) idx[i] = static_cast<std::int32_t>(i);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](std::int32_t a, std::int32_t b) { return l[static_cast<std::size_t>(a)] > l[static_cast<std::size_t>(b)]; });
  idx.resize(k);
  return idx;
}

}  // namespace

// Pair k is Box-Muller on rng::bits(seed, k): checked against the same formula in double
// with libm (the stream's own log/sin/cos are polynomials).
TEST(SynthNormals, MatchDoubleBoxMuller) {
  constexpr std::size_t n = 20000;
  std::vector<float> z(n);
  synth_normals(42, 0, z);
  double worst = 0;
  for (std::size_t k = 0; k < n / 2; ++k) {
    const std::uint64_t r = rng::bits(42, k);
    const double u1 = (static_cast<double>(r >> 40) + 1.0) * 0x1p-24;
    const double u2 = static_cast<double>(r & 0xffffffu) * 0x1p-24;
    const double rad = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
    worst = std::max({worst, std::fabs(z[2 * k] - rad * std::cos(th)), std::fabs(z[2 * k + 1] - rad * std::sin(th))});
  }
  EXPECT_LT(worst, 4e-6);
}

TEST(SynthNormals, FollowTheNormalLaw) {
  constexpr std::size_t n = 1 << 20;
  std::vector<float> z(n);
  synth_normals(7, 0, z);
  double s = 0, s2 = 0, s4 = 0;
  std::size_t in1 = 0, in2 = 0;
  for (float x : z) {
    s += x, s2 += double(x) * x, s4 += double(x) * x * x * x;
    in1 += std::fabs(x) < 1.f, in2 += std::fabs(x) < 2.f;
  }
  const double dn = n;
  EXPECT_NEAR(s / dn, 0.0, 5.0 / std::sqrt(dn));
  EXPECT_NEAR(s2 / dn, 1.0, 5.0 * std::sqrt(2.0 / dn));
  EXPECT_NEAR(s4 / dn, 3.0, 0.05);
  EXPECT_NEAR(double(in1) / dn, 0.682689, 0.003);
  EXPECT_NEAR(double(in2) / dn, 0.954500, 0.002);
}

TEST(SynthNormals, AnySliceIsTheSameStream) {
  std::vector<float> all(101);
  synth_normals(3, 10, all);
  for (std::size_t first : {10u, 11u, 12u, 57u}) {
    for (std::size_t len : {0u, 1u, 2u, 5u, 30u}) {
      if (first - 10 + len > all.size()) continue;
      std::vector<float> part(len);
      synth_normals(3, first, part);
      for (std::size_t i = 0; i < len; ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(part[i]), std::bit_cast<std::uint32_t>(all[first - 10 + i]))
            << first << "+" << i;
    }
  }
}

TEST_F(Synth, EveryArchLoadsRunsAndReadsBackTheSpec) {
  for (const char* arch : {"llama", "qwen3", "qwen3moe"}) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      SynthSpec s;
      s.arch = arch;
      s.n_embd = 48, s.n_layer = 3, s.n_head = 6, s.n_head_kv = 2, s.head_dim = 10, s.n_ff = 80;
      s.n_expert = 4, s.n_expert_used = 2, s.n_ff_exp = 24, s.n_ctx = 128, s.rope_base = 5e5f, s.rms_eps = 1e-5f;
      s.dtype = dt, s.seed = 5;
      SCOPED_TRACE(std::string(arch) + " " + std::string(dtype_name(dt)));
      const auto m = Model::load(write(s, std::string(arch) + ".gguf"));
      const ModelConfig& c = m.config();
      EXPECT_EQ(arch_name(c.arch), arch);
      EXPECT_EQ(c.n_vocab, builtin_vocab_size);
      EXPECT_EQ(c.n_embd, 48);
      EXPECT_EQ(c.n_layer, 3);
      EXPECT_EQ(c.n_head, 6);
      EXPECT_EQ(c.n_head_kv, 2);
      EXPECT_EQ(c.head_dim, 10);
      EXPECT_EQ(c.n_ctx_train, 128);
      EXPECT_EQ(c.rope_base, 5e5f);
      EXPECT_EQ(c.rms_eps, 1e-5f);
      if (c.moe) {
        EXPECT_EQ(c.n_expert, 4);
        EXPECT_EQ(c.n_expert_used, 2);
        EXPECT_EQ(c.n_ff_exp, 24);
      } else {
        EXPECT_EQ(c.n_ff, 80);
      }
      EXPECT_FALSE(m.weights().tied);
      Context ctx({.threads = 2});
      auto cache = m.new_cache(32);
      const std::int32_t ids[] = {1, 100, 200, 300};
      const auto logits = m.prefill(ctx, cache, ids).to_vector();
      ASSERT_EQ(logits.size(), static_cast<std::size_t>(builtin_vocab_size));
      EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
      EXPECT_GT(*std::max_element(logits.begin(), logits.end()) - *std::min_element(logits.begin(), logits.end()), 0.1f);
    }
  }
}

TEST_F(Synth, TensorsAndStatisticsFollowSynthGgufPy) {
  SynthSpec s;
  s.arch = "qwen3moe";
  s.n_embd = 128, s.n_head = 4, s.n_head_kv = 4, s.n_ff_exp = 96, s.n_expert = 4, s.n_ff = 200, s.tied = true;
  const auto r = gguf::Reader::open(write(s, "m.gguf"));
  // 1 embedding + 2 layers x (norm, q, k, v, o, q_norm, k_norm, ffn_norm, router, 3 expert stacks) + output norm.
  ASSERT_EQ(r.tensors().size(), 1u + 2u * 12u + 1u);
  EXPECT_EQ(r.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(r.get_u32("qwen3moe.feed_forward_length"), 200u);
  EXPECT_EQ(r.get_u32("general.file_type"), 0u);
  EXPECT_EQ(r.get_string("general.name"), "synthetic-qwen3moe-h128-l2-s0");
  const auto& up = r.tensor("blk.1.ffn_up_exps.weight");
  EXPECT_EQ(std::vector<std::int64_t>(up.shape().begin(), up.shape().end()), (std::vector<std::int64_t>{128, 96, 4}));
  const auto& down = r.tensor("blk.0.ffn_down_exps.weight");
  EXPECT_EQ(std::vector<std::int64_t>(down.shape().begin(), down.shape().end()), (std::vector<std::int64_t>{96, 128, 4}));
  const auto& router = r.tensor("blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(router.ne[0], 128);
  EXPECT_EQ(router.ne[1], 4);

  const double sd = 1.0 / std::sqrt(128.0);
  struct Want {
    const char* name;
    double mean, sd;
  };
  for (const Want& w : {Want{"token_embd.weight", 0.0, 0.1}, Want{"blk.0.attn_q.weight", 0.0, sd},
                        Want{"blk.1.ffn_gate_exps.weight", 0.0, sd}, Want{"blk.0.ffn_gate_inp.weight", 0.0, 0.5},
                        Want{"blk.0.attn_norm.weight", 1.0, 0.1}, Want{"output_norm.weight", 1.0, 0.1}}) {
    const auto& t = r.tensor(w.name);
    const auto v = floats(r, t);
    const Moments m = moments(v);
    const double n = static_cast<double>(v.size());
    EXPECT_NEAR(m.mean, w.mean, 5 * w.sd / std::sqrt(n)) << w.name;
    EXPECT_NEAR(m.sd, w.sd, 5 * w.sd * std::sqrt(0.5 / n)) << w.name;
  }
  // Distinct tensors draw distinct streams.
  EXPECT_NE(floats(r, r.tensor("blk.0.attn_q.weight"))[0], floats(r, r.tensor("blk.1.attn_q.weight"))[0]);
}

TEST_F(Synth, BytesArePureFunctionOfTheSpec) {
  SynthSpec s;
  s.arch = "qwen3";
  s.n_embd = 256, s.n_ff = 512, s.dtype = DType::f16, s.seed = 99;
  const std::string a = slurp(write(s, "a.gguf", 1));
  EXPECT_EQ(slurp(write(s, "b.gguf", 1)), a);
  EXPECT_EQ(slurp(write(s, "c.gguf", 2)), a);
  EXPECT_EQ(slurp(write(s, "d.gguf", 3)), a);
  write_synthetic_model(dir_ / "e.gguf", s);  // default pool
  EXPECT_EQ(slurp(dir_ / "e.gguf"), a);
  s.seed = 100;
  EXPECT_NE(slurp(write(s, "f.gguf", 2)), a);
}

// f16 and bf16 files hold the f32 file's values rounded (same streams, same order).
TEST_F(Synth, HalfTypesAreTheF32ValuesRounded) {
  SynthSpec s;
  s.arch = "llama";
  s.seed = 11;
  const auto f32 = gguf::Reader::open(write(s, "f32.gguf"));
  for (DType dt : {DType::f16, DType::bf16}) {
    s.dtype = dt;
    const auto h = gguf::Reader::open(write(s, std::string(dtype_name(dt)) + ".gguf"));
    EXPECT_EQ(h.get_u32("general.file_type"), dt == DType::f16 ? 1u : 32u);
    ASSERT_EQ(h.tensors().size(), f32.tensors().size());
    for (std::size_t t = 0; t < h.tensors().size(); ++t) {
      const auto& ti = h.tensors()[t];
      const auto& tf = f32.tensors()[t];
      ASSERT_EQ(ti.name, tf.name);
      const bool vec = ti.n_dims == 1;
      EXPECT_EQ(ti.type, vec ? gguf::GgmlType::F32 : dt == DType::f16 ? gguf::GgmlType::F16 : gguf::GgmlType::BF16) << ti.name;
      const auto a = floats(f32, tf), b = floats(h, ti);
      for (std::size_t i = 0; i < a.size(); ++i) {
        const float want = vec ? a[i] : dt == DType::f16 ? half_to_float(float_to_half(a[i])) : bf16_to_float(float_to_bf16(a[i]));
        ASSERT_EQ(b[i], want) << ti.name << "[" << i << "]";
      }
    }
  }
}

// Oracle: llama-tokenize (llama.cpp) on a file with the built-in vocabulary.
TEST_F(Synth, BuiltinVocabTokenizesLikeLlamaCpp) {
  const auto r = gguf::Reader::open(write(SynthSpec{}, "v.gguf"));
  const tokenizer::Tokenizer tok(tokenizer::load_tokenizer_data(r));
  EXPECT_EQ(tok.vocab_size(), static_cast<std::size_t>(builtin_vocab_size));
  const tokenizer::EncodeOptions opt{.add_special = true, .parse_special = true};
  using V = std::vector<tokenizer::TokenId>;
  EXPECT_EQ(tok.encode("Hello world", opt), (V{1, 259, 299, 328, 335, 335, 338, 259, 346, 338, 341, 335, 327}));
  EXPECT_EQ(tok.encode(" leading  spaces", opt),
            (V{1, 259, 259, 335, 328, 324, 327, 332, 337, 330, 259, 259, 342, 339, 324, 326, 328, 342}));
  EXPECT_EQ(tok.encode("line1\nline2\ttab", opt),
            (V{1, 259, 335, 332, 337, 328, 276, 13, 335, 332, 337, 328, 277, 12, 343, 324, 325}));
  EXPECT_EQ(tok.encode("h\xc3\xa9llo \xe2\x98\x85 \xe6\x97\xa5\xe6\x9c\xac", opt),
            (V{1, 259, 331, 198, 172, 335, 335, 338, 259, 229, 155, 136, 259, 233, 154, 168, 233, 159, 175}));
  EXPECT_EQ(tok.encode("<s>x</s>", opt), (V{1, 1, 259, 347, 2}));
}

// Oracle: llama-oracle (llama.cpp) on `fucina synth g.gguf --arch A --seed 7` (f32, built-in
// vocab), prompt "Hello world": the last prompt position's top-5 logits and 8 greedy tokens.
TEST_F(Synth, LlamaCppRunsTheSameModel) {
  struct Golden {
    const char* arch;
    std::vector<std::pair<std::int32_t, float>> top5;
    std::vector<std::int32_t> greedy;
  };
  const std::vector<Golden> goldens = {
      {"llama", {{330, 3.108292f}, {272, 2.368666f}, {130, 2.235939f}, {252, 2.129918f}, {248, 2.059584f}}, {330, 145, 248, 136, 18, 345, 261, 274}},
      {"qwen3", {{143, 3.282423f}, {236, 2.866637f}, {102, 2.597614f}, {205, 2.574321f}, {161, 2.321940f}}, {143, 87, 308, 15, 213, 353, 261, 299}},
      {"qwen3moe", {{332, 2.945856f}, {256, 2.885459f}, {2, 2.754982f}, {60, 2.379687f}, {166, 2.363784f}}, {332, 331, 268, 250, 282, 113, 297, 175}},
  };
  const std::vector<std::int32_t> prompt = {1, 259, 299, 328, 335, 335, 338, 259, 346, 338, 341, 335, 327};
  for (const Golden& g : goldens) {
    SCOPED_TRACE(g.arch);
    SynthSpec s;
    s.arch = g.arch;
    s.seed = 7;
    const auto m = Model::load(write(s, std::string(g.arch) + ".gguf"));
    Context ctx({.threads = 2});
    auto cache = m.new_cache(64);
    auto logits = m.prefill(ctx, cache, prompt).to_vector();
    std::vector<std::int32_t> want_top;
    for (const auto& [id, v] : g.top5) {
      want_top.push_back(id);
      EXPECT_NEAR(logits[static_cast<std::size_t>(id)], v, 2e-3f) << "token " << id;  // 2e-3: the scalar build's sum order
    }
    EXPECT_EQ(top_ids(logits, 5), want_top);
    for (std::size_t i = 0; i < g.greedy.size(); ++i) {
      const auto t2 = top_ids(logits, 2);
      if (logits[static_cast<std::size_t>(t2[0])] - logits[static_cast<std::size_t>(t2[1])] < 5e-3f) break;  // near-tie
      ASSERT_EQ(t2[0], g.greedy[i]) << "greedy step " << i;
      const std::int32_t next[1] = {t2[0]};
      logits = m.forward(ctx, cache, next).to_vector();
    }
  }
}

TEST_F(Synth, CopiesTheTokenizerFromVocabFrom) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto vocab_path = shared / "vocab" / "ggml-vocab-qwen2.gguf";
  SynthSpec s;
  s.arch = "llama";
  s.tied = true;
  s.vocab_from = vocab_path;
  const auto out = write(s, "q.gguf");
  const auto r = gguf::Reader::open(out);
  const auto v = gguf::Reader::open(vocab_path);
  std::size_t copied = 0;
  for (const auto& kv : v.metadata()) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    ++copied;
    const auto* got = r.find_kv(kv.key);
    ASSERT_NE(got, nullptr) << kv.key;
    EXPECT_EQ(got->value.type(), kv.value.type()) << kv.key;
    EXPECT_TRUE(std::equal(got->value.payload().begin(), got->value.payload().end(), kv.value.payload().begin(),
                           kv.value.payload().end()))
        << kv.key;
  }
  EXPECT_GE(copied, 5u);
  const auto n_vocab = static_cast<std::int64_t>(v.get_string_array("tokenizer.ggml.tokens").size());
  EXPECT_EQ(r.get_u32("llama.vocab_size"), static_cast<std::uint32_t>(n_vocab));
  EXPECT_EQ(r.tensor("token_embd.weight").ne[1], n_vocab);
  const auto m = Model::load(out);
  EXPECT_EQ(m.config().n_vocab, n_vocab);
  EXPECT_TRUE(m.weights().tied);
  // The embedding is tied: std 0.1.
  const Moments mo = moments(floats(r, r.tensor("token_embd.weight")));
  EXPECT_NEAR(mo.sd, 0.1, 1e-3);

  s.vocab_from = dir_ / "missing.gguf";
  EXPECT_THROW(write(s, "x.gguf"), Error);
  s.vocab_from = write(SynthSpec{}, "builtin.gguf");  // a model file is a vocab file too
  EXPECT_NO_THROW(write(s, "y.gguf"));
}

TEST(SynthValidate, RejectsImpossibleSpecsWithAClearMessage) {
  struct Case {
    const char* what;
    void (*edit)(SynthSpec&);
    const char* needle;
  };
  const Case cases[] = {
      {"arch", [](SynthSpec& s) { s.arch = "gpt2"; }, "unknown architecture 'gpt2'"},
      {"hidden 0", [](SynthSpec& s) { s.n_embd = 0; }, "--hidden"},
      {"layers 0", [](SynthSpec& s) { s.n_layer = 0; }, "--layers"},
      {"layers 513", [](SynthSpec& s) { s.n_layer = 513; }, "--layers"},
      {"heads -1", [](SynthSpec& s) { s.n_head = -1; }, "--heads"},
      {"kv > heads", [](SynthSpec& s) { s.n_head_kv = 8; }, "--kv-heads"},
      {"kv not dividing", [](SynthSpec& s) { s.n_head = 6, s.n_head_kv = 4; }, "do not divide"},
      {"hidden % heads", [](SynthSpec& s) { s.n_embd = 66; }, "not a multiple of the head count"},
      {"odd head dim", [](SynthSpec& s) { s.head_dim = 15; }, "even"},
      {"negative head dim", [](SynthSpec& s) { s.head_dim = -2; }, "--head-dim"},
      {"ffn 0", [](SynthSpec& s) { s.n_ff = 0; }, "--ffn"},
      {"ctx 0", [](SynthSpec& s) { s.n_ctx = 0; }, "--ctx"},
      {"experts used > experts", [](SynthSpec& s) { s.arch = "qwen3moe", s.n_expert_used = 9; }, "--experts-used"},
      {"experts 0", [](SynthSpec& s) { s.arch = "qwen3moe", s.n_expert = 0; }, "--experts"},
      {"expert ffn 0", [](SynthSpec& s) { s.arch = "qwen3moe", s.n_ff_exp = 0; }, "--expert-ffn"},
      {"rope base", [](SynthSpec& s) { s.rope_base = 0.f; }, "--rope-base"},
      {"eps nan", [](SynthSpec& s) { s.rms_eps = std::nanf(""); }, "--eps"},
      {"std < 0", [](SynthSpec& s) { s.std = -1.f; }, "--std"},
      {"dtype", [](SynthSpec& s) { s.dtype = DType::i32; }, "f32, f16 or bf16"},
      {"too big", [](SynthSpec& s) { s.n_embd = 1 << 20, s.n_head = 1, s.n_head_kv = 1, s.head_dim = 1 << 16, s.n_ff = 1 << 20, s.n_layer = 512; },
       "would take"},
  };
  const auto out = std::filesystem::temp_directory_path() / ("fucina_synth_bad_" + std::to_string(::getpid()) + ".gguf");
  for (const Case& c : cases) {
    SynthSpec s;
    c.edit(s);
    try {
      write_synthetic_model(out, s);
      ADD_FAILURE() << c.what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << c.what;
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << c.what << ": " << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out)) << c.what << ": a file was written";
  }
  SynthSpec ok;
  ok.arch = "qwen3moe", ok.n_embd = 66, ok.head_dim = 8;  // an explicit head dim lifts the divisibility rule
  EXPECT_NO_THROW(check_synth_spec(ok));
}

// LoadOptions::repack copies f16/f32 matrices into huge-page memory (and releases the
// file's pages) and repacks quantized ones: the copies must give the file's logits
// bit for bit; the repacked kernels match the in-place ones to rounding (packed_test).
TEST_F(Synth, RepackedWeightsGiveTheMappedFilesLogits) {
  for (DType dt : {DType::f32, DType::f16}) {
    SynthSpec s;
    s.arch = "qwen3";
    s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_ff = 96;
    s.n_ctx = 128, s.dtype = dt, s.seed = 11;
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const auto path = write(s, "m.gguf");
    const auto copied = Model::load(path, {.repack = true});
    const auto mapped = Model::load(path, {.repack = false});
    Context ctx({.threads = 2});
    std::vector<std::int32_t> ids(20);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(7 + 17 * i);
    auto c1 = copied.new_cache(64), c2 = mapped.new_cache(64);
    EXPECT_EQ(copied.prefill(ctx, c1, ids).to_vector(), mapped.prefill(ctx, c2, ids).to_vector());
    const std::int32_t next[] = {5};
    EXPECT_EQ(copied.prefill(ctx, c1, next).to_vector(), mapped.prefill(ctx, c2, next).to_vector());
    // The copy is not the mapping: the two loads' first matrices live at different addresses
    // with equal contents.
    const RawTensor& a = dt == DType::f16 ? copied.weights().layers[0].wq.f16().raw() : copied.weights().layers[0].wq.f32().raw();
    const RawTensor& b = dt == DType::f16 ? mapped.weights().layers[0].wq.f16().raw() : mapped.weights().layers[0].wq.f32().raw();
    const std::size_t bytes = static_cast<std::size_t>(a.numel()) * dtype_size(dt);
    EXPECT_NE(a.buf.bytes(), b.buf.bytes());
    EXPECT_EQ(std::memcmp(a.buf.bytes(), b.buf.bytes(), bytes), 0);
  }
}
