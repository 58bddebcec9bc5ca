// TokenizerData from a GGUF file's tokenizer.ggml.* metadata.
#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer_data.hpp"

namespace fucina::tokenizer {

namespace {

// A special token id: absent or negative means none (the model default applies). An id past
// the vocabulary is refused (llama.cpp warns and uses the default, which hides a broken file).
std::optional<TokenId> opt_id(const gguf::Reader& f, std::string_view key, std::size_t n_tokens) {
  if (!f.contains(key)) return std::nullopt;
  const std::int64_t v = f.get_int(key);
  if (v < 0) return std::nullopt;
  FUCINA_CHECK(static_cast<std::uint64_t>(v) < n_tokens, InvalidFile,
               "[tokenizer] {} = {} is outside the vocabulary of {} tokens", key, v, n_tokens);
  return static_cast<TokenId>(v);
}

std::optional<bool> opt_bool(const gguf::Reader& f, std::string_view key) {
  if (!f.contains(key)) return std::nullopt;
  return f.get_bool(key);
}

std::vector<std::string> string_array(const gguf::Reader& f, std::string_view key) {
  const std::vector<std::string_view> views = f.get_string_array(key);
  return {views.begin(), views.end()};
}

}  // namespace

TokenizerData load_tokenizer_data(const gguf::Reader& f) {
  TokenizerData d;
  FUCINA_CHECK(f.contains("tokenizer.ggml.model"), InvalidFile, "[tokenizer] GGUF has no tokenizer.ggml.model");
  d.model = std::string(f.get_string("tokenizer.ggml.model"));
  if (f.contains("tokenizer.ggml.pre")) d.pre = std::string(f.get_string("tokenizer.ggml.pre"));
  FUCINA_CHECK(f.contains("tokenizer.ggml.tokens"), InvalidFile, "[tokenizer] GGUF has no tokenizer.ggml.tokens");
  d.tokens = string_array(f, "tokenizer.ggml.tokens");
  if (f.contains("tokenizer.ggml.scores")) {
    const gguf::ArrayView a = f.get_array_view("tokenizer.ggml.scores");
    if (a.element_type() == gguf::ValueType::Int32) {
      for (const std::int64_t v : a.to_int_vector()) d.scores.push_back(static_cast<float>(v));
    } else {
      d.scores = a.to_vector<float>();
    }
    FUCINA_CHECK(d.scores.size() >= d.tokens.size(), InvalidFile, "[tokenizer] {} scores for {} tokens",
                 d.scores.size(), d.tokens.size());
  }
  if (f.contains("tokenizer.ggml.token_type")) {
    d.token_types = f.get_array<std::int32_t>("tokenizer.ggml.token_type");
    FUCINA_CHECK(d.token_types.size() >= d.tokens.size(), InvalidFile, "[tokenizer] {} token types for {} tokens",
                 d.token_types.size(), d.tokens.size());
  }
  if (f.contains("tokenizer.ggml.merges")) d.merges = string_array(f, "tokenizer.ggml.merges");
  const std::size_t n = d.tokens.size();
  d.bos_id = opt_id(f, "tokenizer.ggml.bos_token_id", n);
  d.eos_id = opt_id(f, "tokenizer.ggml.eos_token_id", n);
  d.unk_id = opt_id(f, "tokenizer.ggml.unknown_token_id", n);
  d.sep_id = opt_id(f, "tokenizer.ggml.seperator_token_id", n);  // sic, the GGUF key name
  d.pad_id = opt_id(f, "tokenizer.ggml.padding_token_id", n);
  d.mask_id = opt_id(f, "tokenizer.ggml.mask_token_id", n);
  d.eot_id = opt_id(f, "tokenizer.ggml.eot_token_id", n);
  d.eom_id = opt_id(f, "tokenizer.ggml.eom_token_id", n);
  d.add_bos = opt_bool(f, "tokenizer.ggml.add_bos_token");
  d.add_eos = opt_bool(f, "tokenizer.ggml.add_eos_token");
  d.add_space_prefix = opt_bool(f, "tokenizer.ggml.add_space_prefix");
  if (f.contains("tokenizer.chat_template")) d.chat_template = std::string(f.get_string("tokenizer.chat_template"));
  if (f.contains("general.name")) d.model_name = std::string(f.get_string("general.name"));
  if (d.model == "gpt2")
    FUCINA_CHECK(!d.merges.empty() || f.contains("tokenizer.ggml.merges"), InvalidFile,
                 "[tokenizer] gpt2 tokenizer without tokenizer.ggml.merges");
  return d;
}

}  // namespace fucina::tokenizer
