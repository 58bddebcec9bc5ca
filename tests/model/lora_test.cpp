// LoRA adapter files (model/lora.hpp), the merge (model/lora_merge.hpp) and `fucina export-lora`.
#include <fmt/core.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fucina/core/error.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/lora.hpp"
#include "fucina/model/lora_merge.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/quantize_model.hpp"
#include "fucina/quant/traits.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
namespace fm = fucina::model;
using fucina::gguf::GgmlType;

namespace {

class Lora : public fucina::test::TempDirTest {
 protected:
  Lora() : TempDirTest("lora") {}

  fs::path base(const std::string& name, fucina::DType dtype = fucina::DType::f32, std::uint64_t seed = 1) {
    fm::SynthSpec spec;
    spec.arch = "qwen3";
    spec.dtype = dtype;
    spec.seed = seed;
    const fs::path p = dir_ / name;
    fm::write_synthetic_model(p, spec);
    return p;
  }

};

using fucina::test::error_of;

TEST_F(Lora, RoundTripKeepsEveryValueAndTheMetadata) {
  const auto b = fucina::gguf::Reader::open(base("b.gguf"));
  fm::RandomLoraSpec rs;
  rs.targets = "q,v,down";
  rs.rank = 4;
  rs.alpha = 8;
  auto ad = fm::random_lora(b, rs);
  ad.name = "test adapter";
  ASSERT_EQ(ad.matrices.size(), 6u);  // 2 layers x 3 targets
  fm::write_lora(dir_ / "a.gguf", ad);

  const auto r = fucina::gguf::Reader::open(dir_ / "a.gguf");
  EXPECT_EQ(r.get_string("general.type"), "adapter");
  EXPECT_EQ(r.get_string("adapter.type"), "lora");
  EXPECT_EQ(r.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(r.get_f32("adapter.lora.alpha"), 8.0f);
  const auto& ta = r.tensor("blk.0.attn_q.weight.lora_a");
  const auto& tb = r.tensor("blk.0.attn_q.weight.lora_b");
  EXPECT_EQ(ta.type, GgmlType::F32);
  EXPECT_EQ(ta.ne[0], 64);  // n_in
  EXPECT_EQ(ta.ne[1], 4);   // rank
  EXPECT_EQ(tb.ne[0], 4);
  EXPECT_EQ(tb.ne[1], b.tensor("blk.0.attn_q.weight").ne[1]);

  const auto back = fm::read_lora(dir_ / "a.gguf");
  EXPECT_EQ(back.arch, "qwen3");
  EXPECT_EQ(back.name, "test adapter");
  EXPECT_EQ(back.alpha, 8.0f);
  ASSERT_EQ(back.matrices.size(), ad.matrices.size());
  for (std::size_t i = 0; i < ad.matrices.size(); ++i) {
    EXPECT_EQ(back.matrices[i].target, ad.matrices[i].target);
    EXPECT_EQ(back.matrices[i].rank, 4);
    EXPECT_EQ(back.matrices[i].n_in, ad.matrices[i].n_in);
    EXPECT_EQ(back.matrices[i].n_out, ad.matrices[i].n_out);
    EXPECT_EQ(back.matrices[i].a, ad.matrices[i].a);
    EXPECT_EQ(back.matrices[i].b, ad.matrices[i].b);
  }
  EXPECT_NO_THROW(fm::check_lora_matches(back, b));
  EXPECT_EQ(back.matrices[0].target, "blk.0.attn_q.weight");
  EXPECT_FLOAT_EQ(back.scale(back.matrices[0], 0.5f), 0.5f * 8.0f / 4.0f);
  fm::LoraAdapter no_alpha = back;
  no_alpha.alpha = 0;
  EXPECT_EQ(no_alpha.scale(back.matrices[0], 0.5f), 0.5f);
}

TEST_F(Lora, ReadsF16AndBf16TensorsAsF32AndSkipsNormVectors) {
  fucina::gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  w.set_string("general.type", "adapter");
  w.set_string("adapter.type", "lora");
  const std::vector<std::uint16_t> a{fucina::quant::fp32_to_fp16(0.5f), fucina::quant::fp32_to_fp16(-2.0f),
                                     fucina::quant::fp32_to_fp16(0.25f), fucina::quant::fp32_to_fp16(1.0f)};
  const std::vector<std::uint16_t> b{fucina::quant::fp32_to_bf16(3.0f), fucina::quant::fp32_to_bf16(-0.125f)};
  const std::vector<float> norm{1, 1};
  const std::array<std::int64_t, 2> ne_a{2, 2}, ne_b{2, 1};
  const std::array<std::int64_t, 1> ne_n{2};
  w.add_tensor("blk.0.attn_q.weight.lora_a", GgmlType::F16, ne_a, std::as_bytes(std::span(a)));
  w.add_tensor("blk.0.attn_q.weight.lora_b", GgmlType::BF16, ne_b, std::as_bytes(std::span(b)));
  w.add_tensor("blk.0.attn_norm.weight", GgmlType::F32, ne_n, std::as_bytes(std::span(norm)));
  const auto ad = fm::read_lora(fucina::gguf::Reader::parse(w.to_bytes()));
  EXPECT_EQ(ad.alpha, 0.0f);  // absent
  ASSERT_EQ(ad.matrices.size(), 1u);
  EXPECT_EQ(ad.matrices[0].a, (std::vector<float>{0.5f, -2.0f, 0.25f, 1.0f}));
  EXPECT_EQ(ad.matrices[0].b, (std::vector<float>{3.0f, -0.125f}));
  EXPECT_EQ(ad.matrices[0].rank, 2);
  EXPECT_EQ(ad.matrices[0].n_out, 1);
}

// Each broken adapter is one Writer edit away from a good one.
TEST_F(Lora, BrokenAdaptersAreClearErrors) {
  const auto make = [](std::string_view general_type, bool with_b, std::int64_t b_rank, std::string_view extra) {
    fucina::gguf::Writer w;
    w.set_string("general.architecture", "qwen3");
    w.set_string("general.type", general_type);
    w.set_string("adapter.type", "lora");
    static const std::vector<float> zeros(64 * 8, 0.0f);
    const std::array<std::int64_t, 2> ne_a{64, 4}, ne_b{b_rank, 64};
    const auto bytes = [&](std::int64_t n) { return std::as_bytes(std::span(zeros.data(), static_cast<std::size_t>(n))); };
    w.add_tensor("blk.0.attn_q.weight.lora_a", GgmlType::F32, ne_a, bytes(64 * 4));
    if (with_b) w.add_tensor("blk.0.attn_q.weight.lora_b", GgmlType::F32, ne_b, bytes(b_rank * 64));
    if (!extra.empty()) w.add_tensor(extra, GgmlType::F32, ne_a, bytes(64 * 4));
    return fucina::gguf::Reader::parse(w.to_bytes());
  };
  EXPECT_NO_THROW(fm::read_lora(make("adapter", true, 4, "")));
  EXPECT_EQ(error_of([&] { fm::read_lora(make("model", true, 4, "")); }),
            "[lora] adapter: general.type is 'model', expected 'adapter' (not a LoRA adapter)");
  EXPECT_EQ(error_of([&] { fm::read_lora(make("adapter", false, 4, "")); }),
            "[lora] adapter: 'blk.0.attn_q.weight' has a .lora_a but no .lora_b");
  EXPECT_EQ(error_of([&] { fm::read_lora(make("adapter", true, 8, "")); }),
            "[lora] adapter: 'blk.0.attn_q.weight': rank mismatch, lora_a has 4 rows but lora_b has 8 columns");
  EXPECT_EQ(error_of([&] { fm::read_lora(make("adapter", true, 4, "blk.0.attn_q.weight")); }),
            "[lora] adapter: tensor 'blk.0.attn_q.weight' is neither a .lora_a nor a .lora_b");
  EXPECT_EQ(error_of([&] { fm::read_lora(make("adapter", true, 4, "token_embd.weight.lora_a")); }),
            "[lora] adapter: 'token_embd.weight' has a .lora_a but no .lora_b");

  // A model file is not an adapter; an adapter for another model is refused against it.
  const fs::path b = base("b.gguf");
  EXPECT_EQ(error_of([&] { fm::read_lora(b); }),
            fmt::format("[lora] {}: general.type is '', expected 'adapter' (not a LoRA adapter)", b.string()));
  auto ad = fm::read_lora(make("adapter", true, 4, ""));
  ad.matrices[0].target = "blk.7.attn_q.weight";
  const auto br = fucina::gguf::Reader::open(b);
  EXPECT_EQ(error_of([&] { fm::check_lora_matches(ad, br); }),
            "[lora] adapter tensor 'blk.7.attn_q.weight' does not exist in the base model (wrong base model?)");
  ad.matrices[0].target = "blk.0.attn_k.weight";  // [64, 32] in the base
  EXPECT_EQ(error_of([&] { fm::check_lora_matches(ad, br); }),
            "[lora] 'blk.0.attn_k.weight': the adapter is for [64, 64] (n_in, n_out), the base tensor is [64, 32] (wrong "
            "base model?)");
  ad.arch = "llama";
  EXPECT_EQ(error_of([&] { fm::check_lora_matches(ad, br); }),
            "[lora] the adapter is for architecture 'llama', the model is 'qwen3'");
  EXPECT_EQ(error_of([&] { fm::lora_target_tensors(br, "q,x"); }),
            "[lora] unknown LoRA target 'x' (known: q, k, v, o, gate, up, down)");
}

// W + s * B A in double, from the base's decoded values and the adapter's: what the merge
// must give within f32 rounding (the golden test pins the exact bits to llama-export-lora's).
std::vector<double> reference_merge(const std::vector<float>& w, const fm::LoraMatrix& m, float scale) {
  std::vector<double> out(w.begin(), w.end());
  for (std::int64_t o = 0; o < m.n_out; ++o)
    for (std::int64_t i = 0; i < m.n_in; ++i) {
      double d = 0;
      for (std::int64_t k = 0; k < m.rank; ++k) d += static_cast<double>(m.b[o * m.rank + k]) * m.a[k * m.n_in + i];
      out[o * m.n_in + i] += scale * d;
    }
  return out;
}

std::vector<float> decode(const fucina::gguf::Reader& r, const fucina::gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<std::size_t>(t.n_elements()));
  fucina::quant::dequantize_row(t.type, r.tensor_data(t).data(), v.data(), t.n_elements());
  return v;
}

TEST_F(Lora, MergedWeightsAreWPlusScaledBA) {
  for (const auto dtype : {fucina::DType::f32, fucina::DType::f16}) {
    SCOPED_TRACE(fucina::dtype_name(dtype));
    const fs::path bp = base("b.gguf", dtype);
    const auto b = fucina::gguf::Reader::open(bp);
    fm::RandomLoraSpec rs;
    rs.targets = "q,o,up";
    rs.rank = 16;  // tinyBLAS order where n_in allows, ggml_vec_dot elsewhere
    rs.b_std = 0.5f;
    const fm::ScaledLora s{fm::random_lora(b, rs), 0.75f};
    fucina::ThreadPool pool(2);
    for (const auto& m : s.adapter.matrices) {
      const auto& t = b.tensor(m.target);
      const auto merged = fm::merge_lora_tensor(pool, b, t, std::span(&s, 1));
      const auto ref = reference_merge(decode(b, t), m, s.adapter.scale(m, 0.75f));
      double max_delta = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(merged[i], ref[i], 1e-5 * (1 + std::abs(ref[i]))) << m.target << " element " << i;
        max_delta = std::max(max_delta, std::abs(ref[i] - decode(b, t)[i]));
      }
      EXPECT_GT(max_delta, 1e-2) << "the adapter barely changes " << m.target;
    }
    // The file: merged tensors in the base's type, the rest byte for byte.
    const std::vector<fs::path> paths{dir_ / "a.gguf"};
    fm::write_lora(paths[0], s.adapter);
    const auto stats = fm::export_lora(bp, paths, std::span(&s, 1), dir_ / "m.gguf", {});
    EXPECT_EQ(stats.n_merged, s.adapter.matrices.size());
    const auto out = fucina::gguf::Reader::open(dir_ / "m.gguf");
    ASSERT_EQ(out.tensors().size(), b.tensors().size());
    for (const auto& t : b.tensors()) {
      const auto& o = out.tensor(t.name);
      EXPECT_EQ(o.type, t.type);
      const auto* m = s.adapter.find(t.name);
      if (!m) {
        EXPECT_TRUE(std::ranges::equal(out.tensor_data(o), b.tensor_data(t))) << t.name;
        continue;
      }
      const std::vector<float> expect = fm::merge_lora_tensor(pool, b, t, std::span(&s, 1));
      const auto got = decode(out, o);
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], t.type == GgmlType::F16 ? fucina::quant::fp16_to_fp32(fucina::quant::fp32_to_fp16(expect[i])) : expect[i]);
    }
    EXPECT_EQ(out.get_int("general.file_type"), b.get_int("general.file_type"));
  }
}

// A quantized base is decoded, merged and re-encoded to its own type.
TEST_F(Lora, QuantizedBaseStaysQuantized) {
  const fs::path f32 = base("b32.gguf");
  fucina::quant::QuantizeOptions qo;
  qo.ftype = fucina::quant::FileType::MostlyQ8_0;
  fucina::quant::quantize_model(f32, dir_ / "q8.gguf", qo);
  const auto b = fucina::gguf::Reader::open(dir_ / "q8.gguf");
  fm::RandomLoraSpec rs;
  rs.targets = "k,gate";
  rs.b_std = 0.5f;
  const fm::ScaledLora s{fm::random_lora(b, rs), 1.0f};
  const std::vector<fs::path> paths{dir_ / "a.gguf"};
  fm::write_lora(paths[0], s.adapter);
  fm::export_lora(dir_ / "q8.gguf", paths, std::span(&s, 1), dir_ / "m.gguf", {});
  const auto out = fucina::gguf::Reader::open(dir_ / "m.gguf");
  fucina::ThreadPool pool(1);
  for (const auto& m : s.adapter.matrices) {
    const auto& t = out.tensor(m.target);
    ASSERT_EQ(t.type, GgmlType::Q8_0) << m.target;
    const auto merged = fm::merge_lora_tensor(pool, b, b.tensor(m.target), std::span(&s, 1));
    std::vector<std::byte> q(out.tensor_data(t).size());
    fucina::quant::quantize_row(GgmlType::Q8_0, merged.data(), q.data(), t.n_elements());
    EXPECT_TRUE(std::ranges::equal(out.tensor_data(t), q)) << m.target;
    EXPECT_FALSE(std::ranges::equal(out.tensor_data(t), b.tensor_data(b.tensor(m.target)))) << m.target;
  }
}

TEST_F(Lora, ExportLoraCli) {
  FUCINA_REQUIRE_CLI();
  using fucina::test::run_fucina;
  const fs::path b = base("b.gguf");
  const auto q = [](const fs::path& p) { return fmt::format("'{}'", p.string()); };
  auto r = run_fucina(fmt::format("synth {} --lora-for {} --rank 4 --lora-targets q,down --seed 2", q(dir_ / "a.gguf"), q(b)));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_fucina(fmt::format("synth {} --lora-for {} --rank 8 --alpha 0 --lora-targets q --seed 3", q(dir_ / "a2.gguf"), q(b)));
  ASSERT_EQ(r.status, 0) << r.output;

  // Two adapters, one scaled in each spelling; the tensors are W + s1 B1 A1 + s2 B2 A2.
  r = run_fucina(fmt::format("export-lora {} --lora-scaled {} 0.5 --lora-scaled {}:-2 -o {} -t 2", q(b), q(dir_ / "a.gguf"),
                             (dir_ / "a2.gguf").string(), q(dir_ / "m.gguf")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("merged 4 of 25 tensors from 2 adapter(s)"), std::string::npos) << r.output;
  const auto br = fucina::gguf::Reader::open(b), out = fucina::gguf::Reader::open(dir_ / "m.gguf");
  const auto a1 = fm::read_lora(dir_ / "a.gguf"), a2 = fm::read_lora(dir_ / "a2.gguf");
  const auto& t = br.tensor("blk.1.attn_q.weight");
  auto ref = reference_merge(decode(br, t), *a1.find(t.name), a1.scale(*a1.find(t.name), 0.5f));
  const auto add = reference_merge(std::vector<float>(ref.size(), 0.0f), *a2.find(t.name), -2.0f);
  const auto got = decode(out, out.tensor(t.name));
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i] + add[i], 1e-5 * (1 + std::abs(ref[i])));

  // --type converts the merged model.
  r = run_fucina(fmt::format("export-lora -m {} --lora {} -o {} --type q8_0", q(b), q(dir_ / "a.gguf"), q(dir_ / "m8.gguf")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(fucina::gguf::Reader::open(dir_ / "m8.gguf").tensor("blk.0.attn_q.weight").type, GgmlType::Q8_0);

  // Bad input: one line, non-zero exit, nothing written; the output is never an input.
  const auto fails = [&](const std::string& args, int status, const std::string& message) {
    const auto e = run_fucina(args);
    EXPECT_EQ(e.status, status) << args << "\n" << e.output;
    EXPECT_EQ(e.output, message + "\n") << args;
  };
  fails(fmt::format("export-lora {} -o {}", q(b), q(dir_ / "x.gguf")), 2,
        "fucina export-lora: no adapter given: pass --lora ADAPTER.gguf");
  fails(fmt::format("export-lora {} --lora {}", q(b), q(dir_ / "a.gguf")), 2, "fucina export-lora: no output given: pass -o MERGED.gguf");
  fails(fmt::format("export-lora {} --lora {} -o {} --type q9", q(b), q(dir_ / "a.gguf"), q(dir_ / "x.gguf")), 2,
        "fucina export-lora: unknown --type 'q9' (see fucina quantize --help for the list)");
  fails(fmt::format("export-lora {} --lora {} -o {}", q(b), q(b), q(dir_ / "x.gguf")), 1,
        fmt::format("fucina export-lora: error: [lora] {}: general.type is '', expected 'adapter' (not a LoRA adapter)", b.string()));
  fails(fmt::format("synth {} --lora-for {} --rank 0", q(dir_ / "x.gguf"), q(b)), 2, "fucina synth: --rank must be at least 1, got 0");
  fails(fmt::format("synth {} --lora-for {} --lora-targets q,qk", q(dir_ / "x.gguf"), q(b)), 1,
        "fucina synth: error: [lora] unknown LoRA target 'qk' (known: q, k, v, o, gate, up, down)");
  const auto before = fs::file_size(b);
  const auto e = run_fucina(fmt::format("export-lora {} --lora {} -o {}", q(b), q(dir_ / "a.gguf"), q(b)));
  EXPECT_EQ(e.status, 1) << e.output;
  EXPECT_EQ(fs::file_size(b), before);
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

}  // namespace
