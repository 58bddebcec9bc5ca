// fucina::quant::quantize_model: byte identity with llama-quantize on generated models (the
// goldens are llama-quantize's output hashes for the exact bytes synth_model.hpp writes),
// the per-tensor type rules, streaming, threading and error handling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "quantize/golden_support.hpp"
#include "quantize/synth_model.hpp"

namespace fucina::quant {
namespace {

using gguf::GgmlType;
using test::make_synth_model;
using test::synth_specs;

QuantizeOptions options_for(std::string_view type, bool pure = false) {
  const auto t = find_quantize_target(type);
  EXPECT_TRUE(t.has_value()) << type;
  QuantizeOptions o;
  o.ftype = t->ftype;
  o.copy_only = t->copy_only;
  o.pure = pure;
  o.n_threads = 2;
  return o;
}

std::map<std::string, GgmlType> plan_types(const ModelPlan& p) {
  std::map<std::string, GgmlType> m;
  for (const auto& t : p.tensors) m[t.name] = t.dst_type;
  return m;
}

std::vector<std::byte> quantize_to_bytes(const gguf::Reader& r, const QuantizeOptions& o) {
  std::vector<std::byte> out;
  quantize_model(r, o, [&](gguf::Bytes b) { out.insert(out.end(), b.begin(), b.end()); });
  return out;
}

TEST(QuantizeTargets, LookupIsCaseInsensitiveWithAliases) {
  EXPECT_EQ(find_quantize_target("q4_k_m")->ftype, FileType::MostlyQ4_K_M);
  EXPECT_EQ(find_quantize_target("Q4_K")->ftype, FileType::MostlyQ4_K_M);
  EXPECT_EQ(find_quantize_target("Q3_K")->ftype, FileType::MostlyQ3_K_M);
  EXPECT_TRUE(find_quantize_target("copy")->copy_only);
  EXPECT_FALSE(find_quantize_target("Q4_K_X").has_value());
  EXPECT_FALSE(find_quantize_target("").has_value());
  EXPECT_EQ(quantize_targets().size(), 24u);
}

TEST(QuantizeSha256, KnownVectors) {
  const std::string abc = "abc";
  EXPECT_EQ(test::sha256_hex(std::as_bytes(std::span(abc))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(test::sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  test::Sha256 h;  // split across update() calls
  h.update(std::as_bytes(std::span(two)).first(5));
  h.update(std::as_bytes(std::span(two)).subspan(5));
  EXPECT_EQ(h.hex(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// The headline check: the core TYPEs of both generated models hash to what llama-quantize
// wrote for the same bytes (every other TYPE and flag: test_quantize_slow).
TEST(QuantizeGoldens, SyntheticModelsMatchLlamaQuantizeByteForByte) {
  EXPECT_EQ(test::check_synthetic_goldens(test::is_core_golden), 2 * 9);
}

TEST(QuantizeModel, ThreadCountDoesNotChangeTheBytes) {
  const auto bytes = make_synth_model(synth_specs()[1]);
  const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  for (const char* type : {"Q4_K_M", "IQ4_NL"}) {
    QuantizeOptions o = options_for(type);
    o.n_threads = 1;
    const auto one = quantize_to_bytes(r, o);
    o.n_threads = 3;
    EXPECT_EQ(one, quantize_to_bytes(r, o)) << type;
  }
}

// The mix rules on the 8-layer model, from llama.cpp's use_more_bits(i, n):
// i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2  ->  layers 0, 3, 6, 7 of 8.
TEST(QuantizePlan, Q4KMGivesMoreBitsToAttnVAndFfnDownOnSelectedLayers) {
  const auto bytes = make_synth_model(synth_specs()[0]);
  const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  const ModelPlan plan = plan_quantization(r, options_for("Q4_K_M"));
  const auto types = plan_types(plan);
  for (int l = 0; l < 8; ++l) {
    const bool more = l == 0 || l == 3 || l == 6 || l == 7;
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(types.at(b + "attn_v.weight"), more ? GgmlType::Q6_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), more ? GgmlType::Q6_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(types.at(b + "attn_q.weight"), GgmlType::Q4_K);
    EXPECT_EQ(types.at(b + "attn_norm.weight"), GgmlType::F32);  // 1-D: never quantized
  }
  EXPECT_EQ(types.at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q4_K);  // untied: default type
  EXPECT_EQ(plan.file_type, 15u);
  EXPECT_EQ(plan.n_fallback, 0);

  // --pure: the default type everywhere it fits.
  const auto pure = plan_types(plan_quantization(r, options_for("Q4_K_M", true)));
  EXPECT_EQ(pure.at("output.weight"), GgmlType::Q4_K);
  EXPECT_EQ(pure.at("blk.0.attn_v.weight"), GgmlType::Q4_K);
}

TEST(QuantizePlan, TiedEmbeddingsAndFallbacks) {
  const auto bytes = make_synth_model(synth_specs()[1]);  // tied, ffn 160
  const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  const ModelPlan plan = plan_quantization(r, options_for("Q4_K_M"));
  const auto types = plan_types(plan);
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q6_K);  // stands in for output.weight
  // use_more_bits(i, 2) holds for layer 1 only: Q4_K -> Q5_0 and Q6_K -> Q8_0 on 160-wide rows.
  EXPECT_EQ(types.at("blk.0.ffn_down.weight"), GgmlType::Q5_0);
  EXPECT_EQ(types.at("blk.1.ffn_down.weight"), GgmlType::Q8_0);
  EXPECT_EQ(types.at("blk.0.ffn_gate.weight"), GgmlType::Q4_K);  // ne[0] = 256 fits
  EXPECT_EQ(plan.n_fallback, 2);
  const auto q2 = plan_types(plan_quantization(r, options_for("Q2_K")));
  EXPECT_EQ(q2.at("blk.1.ffn_down.weight"), GgmlType::Q4_0);  // Q3_K -> Q4_0
}

TEST(QuantizePlan, OutputOrderIsByLayerThenName) {
  const auto bytes = make_synth_model(synth_specs()[1]);
  const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  const ModelPlan plan = plan_quantization(r, options_for("Q8_0"));
  ASSERT_EQ(plan.tensors.size(), r.tensors().size());
  EXPECT_EQ(plan.tensors[0].name, "output_norm.weight");
  EXPECT_EQ(plan.tensors[1].name, "token_embd.weight");
  EXPECT_EQ(plan.tensors[2].name, "blk.0.attn_k.weight");
  EXPECT_EQ(plan.tensors.back().name, "blk.1.ffn_up.weight");
}

TEST(QuantizeModel, WritesMetadataLikeLlamaQuantize) {
  const auto bytes = make_synth_model(synth_specs()[0]);
  const auto in = gguf::Reader::parse(gguf::Bytes(bytes));
  const auto out_bytes = quantize_to_bytes(in, options_for("Q6_K"));
  const auto out = gguf::Reader::parse(gguf::Bytes(out_bytes));
  const auto md = out.metadata();
  ASSERT_EQ(md.size(), in.metadata().size() + 1);
  EXPECT_EQ(md[md.size() - 2].key, "general.quantization_version");
  EXPECT_EQ(out.get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(md.back().key, "general.file_type");
  EXPECT_EQ(out.get_u32("general.file_type"), 18u);
  EXPECT_EQ(out.tensor("blk.2.attn_q.weight").type, GgmlType::Q6_K);
  // Unconverted tensors are copied verbatim.
  const auto& norm_in = in.tensor("blk.2.attn_norm.weight");
  const auto& norm_out = out.tensor("blk.2.attn_norm.weight");
  const auto a = in.tensor_data(norm_in), b = out.tensor_data(norm_out);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
}

TEST(QuantizeModel, ReportsProgressPerTensor) {
  const auto bytes = make_synth_model(synth_specs()[1]);
  const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  std::size_t done = 0;
  std::uint64_t last_bytes = 0;
  quantize_model(r, options_for("Q8_0"), [](gguf::Bytes) {}, [&](const QuantizeProgress& p) {
    EXPECT_EQ(p.count, r.tensors().size());
    EXPECT_GE(p.bytes_in_done, last_bytes);
    last_bytes = p.bytes_in_done;
    if (p.done) {
      EXPECT_EQ(p.index, done++);
    }
  });
  EXPECT_EQ(done, r.tensors().size());
  EXPECT_EQ(last_bytes, [&] {
    std::uint64_t s = 0;
    for (const auto& t : r.tensors()) s += t.size_bytes;
    return s;
  }());
}

class QuantizeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("fucina_quantize_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, std::span<const std::byte> bytes) {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(QuantizeFiles, FileOutputEqualsStreamedOutput) {
  const auto bytes = make_synth_model(synth_specs()[1]);
  const auto in = write("in.gguf", bytes);
  const auto out = dir_ / "out.gguf";
  const QuantizeStats s = quantize_model(in, out, options_for("Q5_K_M"));
  EXPECT_EQ(s.n_tensors, gguf::Reader::parse(gguf::Bytes(bytes)).tensors().size());
  std::ifstream f(out, std::ios::binary);
  std::vector<char> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto streamed = quantize_to_bytes(gguf::Reader::parse(gguf::Bytes(bytes)), options_for("Q5_K_M"));
  ASSERT_EQ(file.size(), streamed.size());
  EXPECT_EQ(std::memcmp(file.data(), streamed.data(), file.size()), 0);
}

TEST_F(QuantizeFiles, ErrorsAreFucinaErrors) {
  const auto expect_code = [](auto&& fn, ErrorCode code) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  const auto o = options_for("Q8_0");
  expect_code([&] { quantize_model(dir_ / "missing.gguf", dir_ / "o.gguf", o); }, ErrorCode::Io);

  auto bytes = make_synth_model(synth_specs()[1]);
  const auto truncated = write("trunc.gguf", std::span(bytes).first(bytes.size() / 2));
  expect_code([&] { quantize_model(truncated, dir_ / "o.gguf", o); }, ErrorCode::InvalidFile);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "o.gguf"));

  const auto in = write("in.gguf", bytes);
  expect_code([&] { quantize_model(in, in, o); }, ErrorCode::InvalidArgument);

  // A NaN in a weight: llama.cpp's loader refuses the file, so do we (and no output remains).
  auto r = gguf::Reader::parse(gguf::Bytes(bytes));
  const auto& t = r.tensor("blk.1.ffn_up.weight");
  const std::size_t at = r.data_offset() + t.offset + 4 * 300;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + at, &nan, 4);
  const auto bad = write("nan.gguf", bytes);
  expect_code([&] { quantize_model(bad, dir_ / "o.gguf", o); }, ErrorCode::InvalidFile);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "o.gguf"));

  // Requantizing a quantized model needs allow_requantize.
  const auto q = quantize_to_bytes(gguf::Reader::parse(gguf::Bytes(make_synth_model(synth_specs()[1]))), o);
  const auto qr = gguf::Reader::parse(gguf::Bytes(q));
  expect_code([&] { plan_quantization(qr, options_for("Q4_0")); }, ErrorCode::InvalidArgument);
  QuantizeOptions re = options_for("Q4_0");
  re.allow_requantize = true;
  EXPECT_NO_THROW(plan_quantization(qr, re));
  // Same type: nothing to requantize, everything is copied.
  EXPECT_NO_THROW(plan_quantization(qr, options_for("Q8_0")));

  // A model without an architecture cannot be given a mix (COPY still works).
  gguf::Writer w;
  const std::array<std::int64_t, 2> ne{32, 2};
  std::vector<float> zeros(64, 0.0f);
  w.add_tensor("x.weight", GgmlType::F32, ne, std::as_bytes(std::span(zeros)));
  const auto noarch = w.to_bytes();
  const auto nr = gguf::Reader::parse(gguf::Bytes(noarch));
  expect_code([&] { plan_quantization(nr, o); }, ErrorCode::InvalidFile);
  EXPECT_NO_THROW(quantize_to_bytes(nr, options_for("COPY")));
}

}  // namespace
}  // namespace fucina::quant
