#pragma once
// TokenizerData: the plain description a Tokenizer is built from, i.e. the GGUF
// `tokenizer.ggml.*` metadata decoded into C++ values (no file format involved).
//
// Note [Tokenizer metadata defaults]
// Optional fields stay empty when the key is absent, so the Tokenizer applies the same
// per-model defaults as llama.cpp: `llama` (SentencePiece) defaults to bos=1, eos=2, unk=0,
// add_bos=true, add_space_prefix=true; `gpt2` (byte-level BPE) defaults to bos=eos=11,
// add_bos=false (true for the llama3/tekken/chameleon pre-tokenizer families).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fucina::gguf {
class Reader;
}

namespace fucina::tokenizer {

using TokenId = std::int32_t;
inline constexpr TokenId null_token = -1;

// GGUF tokenizer.ggml.token_type values (= llama.cpp's llama_token_type).
enum class TokenType : std::int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct TokenizerData {
  std::string model;  // tokenizer.ggml.model: "llama" (SPM) or "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre (BPE pre-tokenizer name); empty = "default"
  std::vector<std::string> tokens;
  std::vector<float> scores;            // empty = all 0
  std::vector<std::int32_t> token_types;  // empty = all Normal
  std::vector<std::string> merges;      // "left right", rank = index (BPE only)

  std::optional<TokenId> bos_id, eos_id, unk_id, sep_id, pad_id, mask_id, eot_id, eom_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;

  std::string chat_template;  // tokenizer.chat_template, verbatim
  std::string model_name;     // general.name: llama.cpp keys a few token attributes on it
};

// Reads the tokenizer.ggml.* keys (plus general.name and tokenizer.chat_template).
// Throws fucina::Error(InvalidFile) naming the key when a key is missing or mistyped.
TokenizerData load_tokenizer_data(const gguf::Reader& file);

}  // namespace fucina::tokenizer
