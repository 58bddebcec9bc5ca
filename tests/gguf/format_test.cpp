// The type table against gguf-py's GGML_QUANT_SIZES (llama.cpp gguf-py/gguf/constants.py),
// transcribed as (block size, bytes) pairs; the dlopen parity test checks all ids against ggml.
#include <gtest/gtest.h>

#include "fucina/gguf/format.hpp"

namespace fucina::gguf {
namespace {

TEST(GgufFormat, TypeTableMatchesGgufPy) {
  struct Row {
    GgmlType t;
    std::uint32_t blck, size;
  };
  const Row rows[] = {
      {GgmlType::F32, 1, 4},        {GgmlType::F16, 1, 2},         {GgmlType::Q4_0, 32, 18},
      {GgmlType::Q4_1, 32, 20},     {GgmlType::Q5_0, 32, 22},      {GgmlType::Q5_1, 32, 24},
      {GgmlType::Q8_0, 32, 34},     {GgmlType::Q8_1, 32, 36},      {GgmlType::Q2_K, 256, 84},
      {GgmlType::Q3_K, 256, 110},   {GgmlType::Q4_K, 256, 144},    {GgmlType::Q5_K, 256, 176},
      {GgmlType::Q6_K, 256, 210},   {GgmlType::Q8_K, 256, 292},    {GgmlType::IQ2_XXS, 256, 66},
      {GgmlType::IQ2_XS, 256, 74},  {GgmlType::IQ3_XXS, 256, 98},  {GgmlType::IQ1_S, 256, 50},
      {GgmlType::IQ4_NL, 32, 18},   {GgmlType::IQ3_S, 256, 110},   {GgmlType::IQ2_S, 256, 82},
      {GgmlType::IQ4_XS, 256, 136}, {GgmlType::I8, 1, 1},          {GgmlType::I16, 1, 2},
      {GgmlType::I32, 1, 4},        {GgmlType::I64, 1, 8},         {GgmlType::F64, 1, 8},
      {GgmlType::IQ1_M, 256, 56},   {GgmlType::BF16, 1, 2},        {GgmlType::TQ1_0, 256, 54},
      {GgmlType::TQ2_0, 256, 66},   {GgmlType::MXFP4, 32, 17},     {GgmlType::NVFP4, 64, 36},
      {GgmlType::Q1_0, 128, 18},    {GgmlType::Q2_0, 64, 18},
  };
  int valid = 0;
  for (std::uint32_t id = 0; id < ggml_type_count; ++id) valid += is_valid_ggml_type(id);
  EXPECT_EQ(valid, static_cast<int>(std::size(rows)));
  for (const Row& r : rows) {
    SCOPED_TRACE(to_string(r.t));
    EXPECT_TRUE(is_valid_ggml_type(static_cast<std::uint32_t>(r.t)));
    EXPECT_EQ(block_size(r.t), r.blck);
    EXPECT_EQ(type_size(r.t), r.size);
    EXPECT_EQ(ggml_type_from_name(to_string(r.t)), r.t);
  }
  for (std::uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u})
    EXPECT_FALSE(is_valid_ggml_type(removed)) << removed;
  EXPECT_EQ(row_size(GgmlType::Q4_K, 4096), 16u * 144u);
  EXPECT_FALSE(ggml_type_from_name("q4_k").has_value());  // ggml spells it q4_K
}

TEST(GgufFormat, ValueTypes) {
  EXPECT_EQ(value_type_size(ValueType::Bool), 1u);
  EXPECT_EQ(value_type_size(ValueType::Float64), 8u);
  EXPECT_EQ(value_type_size(ValueType::String), 0u);
  EXPECT_EQ(to_string(ValueType::String), "str");
  EXPECT_TRUE(is_valid_value_type(12));
  EXPECT_FALSE(is_valid_value_type(13));
  static_assert(value_type_of<float> == ValueType::Float32);
  static_assert(value_type_of<std::uint64_t> == ValueType::Uint64);
}

}  // namespace
}  // namespace fucina::gguf
