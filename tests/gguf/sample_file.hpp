#pragma once
// A small GGUF built with the Writer, shared by the gguf tests: every value type, a nested
// array, and three tensors of different types.
#include <cstdint>
#include <string>
#include <vector>

#include "fucina/gguf/writer.hpp"

namespace fucina::gguf::test {

struct SampleFile {
  std::vector<std::byte> f32_data, q8_data, f16_data;
  Writer writer;
};

inline std::vector<std::byte> pattern_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x & 0xFF);
  }
  return out;
}

// `alignment` 0 leaves general.alignment unset (default 32). ggml rejects arrays of arrays,
// so `nested` can leave that key out.
inline void fill_sample(SampleFile& s, std::uint32_t alignment = 0, bool nested = true) {
  Writer& w = s.writer;
  w.set_string("general.architecture", "llama");
  if (alignment) w.set_alignment(alignment);
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_f32("t.f32", 0.5f);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "hello \xe2\x96\x81world");
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f64("t.f64", -1.25);
  const std::vector<float> scores = {0.f, -1.5f, 2.25f};
  w.set_array<float>("tokenizer.ggml.scores", scores);
  const std::vector<std::int32_t> types = {1, 2, 3, 6};
  w.set_array<std::int32_t>("tokenizer.ggml.token_type", types);
  const std::vector<std::string> tokens = {"<s>", "", "\xe2\x96\x81the"};
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  const std::vector<std::uint16_t> a = {1, 2}, b = {3};
  const std::vector<OwnedValue> inner = {OwnedValue::array<std::uint16_t>(a), OwnedValue::array<std::uint16_t>(b)};
  if (nested) w.set("t.nested", OwnedValue::array_of(ValueType::Array, inner));

  s.f32_data = pattern_bytes(4 * 5 * 3, 1);
  s.q8_data = pattern_bytes(34 * 2, 2);
  s.f16_data = pattern_bytes(2 * 7, 3);
  const std::int64_t ne_f32[] = {5, 3};
  const std::int64_t ne_q8[] = {64};
  const std::int64_t ne_f16[] = {7, 1, 1};
  w.add_tensor("tok_embd.weight", GgmlType::F32, ne_f32, s.f32_data);
  w.add_tensor("blk.0.attn_q.weight", GgmlType::Q8_0, ne_q8, s.q8_data);
  w.add_tensor("output_norm.weight", GgmlType::F16, ne_f16, s.f16_data);
}

}  // namespace fucina::gguf::test
