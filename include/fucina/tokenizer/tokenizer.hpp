#pragma once
// Tokenizer: text <-> token ids, id-exact with llama.cpp for SentencePiece (`llama`) and
// byte-level BPE (`gpt2`) vocabularies.
//
// Note [Encode pipeline]
// 1. Special-token partition: every CONTROL/USER_DEFINED/UNKNOWN token text is cut out of
//    the text, longest token first over the whole text (not leftmost-longest). With
//    parse_special=false only USER_DEFINED tokens are cut (llama.cpp, after HF tokenizers).
// 2. Each remaining fragment is encoded on its own:
//    SPM: a leading space when the fragment starts the text or follows a special token
//    (add_space_prefix), spaces become U+2581, then highest-score-first bigram merging
//    (ties: leftmost) over UTF-8 characters; characters with no token fall back to <0xXX>.
//    BPE: canonical UTF-8 (Note [llama.cpp UTF-8 decoding]), regex pre-tokenization, then
//    lowest-rank-first merging (ties: leftmost) inside each word on raw bytes.
// 3. add_special wraps the result in BOS/EOS as the metadata says.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/tokenizer/tokenizer_data.hpp"

namespace fucina::tokenizer {

enum class VocabKind { Spm, Bpe };

// Token attributes (bit flags, = llama.cpp's llama_token_attr).
enum TokenAttr : std::uint32_t {
  attr_undefined = 0,
  attr_unknown = 1u << 0,
  attr_unused = 1u << 1,
  attr_normal = 1u << 2,
  attr_control = 1u << 3,
  attr_user_defined = 1u << 4,
  attr_byte = 1u << 5,
  attr_normalized = 1u << 6,
  attr_lstrip = 1u << 7,
  attr_rstrip = 1u << 8,
  attr_single_word = 1u << 9,
};

struct EncodeOptions {
  bool add_special = true;     // BOS/EOS as the model's metadata says
  bool parse_special = false;  // recognise control-token texts like "<|im_end|>"
};

struct DecodeOptions {
  bool remove_special = false;   // drop a leading BOS / trailing EOS the model adds itself
  bool render_special = false;   // print control tokens' text (llama.cpp "unparse_special")
  bool clean_spaces = false;     // apply llama.cpp's clean_up_tokenization_spaces when the vocab asks
  // The ids continue a text (a completion after its prompt): keep the SPM leading space of
  // the first piece, so the result is llama.cpp's token_to_piece concatenation, what its
  // generation prints. Off: llama.cpp's detokenize, which drops that space.
  bool continues_text = false;
};

class Tokenizer {
 public:
  // Throws InvalidFile / Unsupported on inconsistent data or an unknown model/pre name.
  explicit Tokenizer(TokenizerData data);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opt = {}) const;
  void encode(std::string_view text, const EncodeOptions& opt, std::vector<TokenId>& out) const;

  // llama.cpp's detokenize (lstrip of the SPM leading space included unless continues_text).
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& opt = {}) const;
  // Bytes of one token as llama.cpp's token_to_piece renders it (may be partial UTF-8).
  std::string_view piece(TokenId id, bool render_special = true) const;

  VocabKind kind() const;
  std::size_t vocab_size() const;
  const std::string& token_text(TokenId id) const;  // raw vocabulary string
  std::uint32_t token_attr(TokenId id) const;
  float token_score(TokenId id) const;
  TokenId find_token(std::string_view text) const;  // null_token when absent

  TokenId bos_id() const;
  TokenId eos_id() const;
  TokenId eot_id() const;
  TokenId unk_id() const;
  TokenId pad_id() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool is_eog(TokenId id) const;  // ends generation (EOS, EOT, <|im_end|>, ...)
  const std::string& chat_template() const;
  const std::string& pre_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for streaming output: hands out text only up to the last
// complete UTF-8 character, holding an unfinished sequence until its bytes arrive. The
// pushed ids together give decode(ids, opt); generation sets opt.continues_text.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, DecodeOptions opt = {}) : tok_(&tok), opt_(opt) {}
  // Appends the token and returns the newly completed text (possibly empty).
  std::string push(TokenId id);
  // Whatever is still held (an incomplete sequence), emitted as-is.
  std::string flush();

 private:
  const Tokenizer* tok_;
  DecodeOptions opt_;
  std::string pending_;
  bool first_ = true;
  bool strip_space_ = !opt_.continues_text;
};

}  // namespace fucina::tokenizer
