#pragma once
// The table of byte-level BPE pre-tokenizers by `tokenizer.ggml.pre` name: regex list plus
// the per-family switches llama.cpp ties to the name (see Note [Pre-tokenizer semantics]).
#include <string>
#include <string_view>
#include <vector>

namespace fucina::tokenizer {

struct PreTokenizerSpec {
  std::vector<std::string> names;     // every tokenizer.ggml.pre value that selects it
  std::vector<std::string> patterns;  // llama.cpp regex syntax, applied in order
  bool ignore_merges = false;         // a word that is itself a token is emitted whole
  bool add_bos = false;               // default for add_bos when the key is absent
  bool clean_spaces = true;           // detokenize removes " ," style spaces
  bool no_bos_token = false;          // the family has no BOS (chatglm)
};

// nullptr when `name` is unknown; "" means "default".
const PreTokenizerSpec* find_pretokenizer_spec(std::string_view name);
// Every supported spec (for tests and `fucina tokenize --help`).
const std::vector<PreTokenizerSpec>& pretokenizer_specs();

}  // namespace fucina::tokenizer
