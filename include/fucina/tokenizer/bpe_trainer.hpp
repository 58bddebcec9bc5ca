#pragma once
// Training a byte-level BPE vocabulary (GPT-2 style) from text, written as GGUF tokenizer
// metadata that llama.cpp and Fucina load (`fucina vocab train`).
//
// Note [BPE training]: the corpus is split into words by a llama.cpp pre-tokenizer (GPT-2's
// regex by default) and each distinct word is counted. The vocabulary starts as the 256
// bytes (so any input encodes), each spelled by GPT-2's bytes_to_unicode; then, until the
// vocabulary has `vocab_size` tokens or no pair occurs `min_frequency` times, the adjacent
// pair of symbols with the highest count over all words (ties: the smaller pair of ids) is
// merged everywhere, left to right, into a new token, and merge rule k is that pair. Counts
// are kept incrementally (only the words holding the merged pair are touched). Special
// tokens (control type) come last. Applying the merges lowest rank first, as llama.cpp
// encodes, reproduces the training segmentation; the result depends only on the text.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::tokenizer {

struct BpeTrainOptions {
  std::int64_t vocab_size = 8192;  // including the 256 byte tokens and the special tokens
  std::int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  std::string pre = "gpt-2";       // tokenizer.ggml.pre (a name llama.cpp knows)
  std::vector<std::string> special{"<|endoftext|>"};  // control tokens; the first is BOS and EOS
};

struct TrainedVocab {
  std::vector<std::string> tokens;  // GPT-2 byte-map spelling (specials as written)
  std::vector<std::string> merges;  // "left right", rank order
  std::vector<std::int32_t> types;  // 1 normal, 3 control
  std::string pre;
  std::int32_t bos = -1, eos = -1;
};

// Throws InvalidArgument for a vocab_size below 256 + specials, an unknown pre-tokenizer.
TrainedVocab train_bpe(std::span<const std::string> texts, const BpeTrainOptions& options);

// tokenizer.ggml.{model = gpt2, pre, tokens, token_type, merges, bos/eos ids, add_bos_token =
// true, add_eos_token = false} (+ general.architecture = llama, general.type = vocab, so
// llama.cpp's tools open it as a vocab-only file); through an AtomicFile.
void write_vocab_gguf(const std::filesystem::path& out, const TrainedVocab& vocab);

}  // namespace fucina::tokenizer
