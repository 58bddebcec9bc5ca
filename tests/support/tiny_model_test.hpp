#pragma once
// A test fixture around the generation tests' tiny model: qwen3, 64 wide, 2 layers, the
// built-in SPM vocabulary, no chat template (random weights: gibberish by design), written
// once per test suite with its tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fucina/model/model.hpp"
#include "fucina/sample/sampler.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::test {

class TinyModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  static std::filesystem::path path() { return dir_ / "m.gguf"; }
  static sample::SamplerConfig greedy() { return {.temperature = 0.f}; }
  std::vector<tokenizer::TokenId> ids(const std::string& text) const { return tok_->encode(text, {.add_special = true}); }

  Context ctx_{{.threads = 2}};
  static inline std::filesystem::path dir_;
  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
};

}  // namespace fucina::test
