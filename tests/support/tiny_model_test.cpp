#include "support/tiny_model_test.hpp"

#include <unistd.h>

#include "fucina/model/synth.hpp"

namespace fucina::test {

void TinyModelTest::SetUpTestSuite() {
  dir_ = std::filesystem::temp_directory_path() / ("fucina_tiny_model_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir_);
  model::SynthSpec spec;  // qwen3, 64 wide, 2 layers, built-in SPM vocabulary, no chat template
  spec.n_ff = 128;
  spec.n_ctx = 2048;
  spec.seed = 4;
  model::write_synthetic_model(path(), spec);
  model_ = new model::Model(model::Model::load(path()));
  tok_ = new tokenizer::Tokenizer(tokenizer::load_tokenizer_data(model_->file()));
}

void TinyModelTest::TearDownTestSuite() {
  delete tok_;
  delete model_;
  tok_ = nullptr;
  model_ = nullptr;
  std::filesystem::remove_all(dir_);
}

}  // namespace fucina::test
