#pragma once
// Training data for `fucina finetune`: a file turned into token sequences with a loss mask.
//
// Note [Training data formats]
// A ".jsonl" file holds one JSON object per line (blank lines are ignored):
//  - {"messages": [{"role": ..., "content": ...}, ...]}: the whole conversation rendered
//    with the model's chat template (generate::render_chat, control tokens parsed). The loss
//    covers each assistant turn: from where rendering the messages before it with the
//    generation prompt ends (those tokens must be a prefix of the conversation's, else an
//    error naming the line) up to and including the next end-of-generation token
//    (<|im_end|>, <|eot_id|>, ...; what the template emits after it, such as ChatML's "\n",
//    is not trained). A template without end tokens: up to where rendering the messages
//    through the turn ends. So the masked tokens are what the model must generate after the
//    generation prompt: the assistant text and its end token (with Qwen3's template the last
//    turn also carries the empty "<think>\n\n</think>\n\n" block the template puts
//    there; earlier turns do not). At least one assistant message.
//  - {"prompt": ..., "completion": ...}: BOS (when the model adds one), prompt and
//    completion tokenized together (so the boundary merges as in running text), then EOS;
//    the loss covers the tokens past the prompt's own tokenization (a token straddling the
//    boundary counts as completion) and the EOS.
//  - {"text": ...}: BOS (when the model adds one), the text, EOS; loss on every token.
// Text fields are tokenized as plain text (control-token texts are not parsed). Any other
// file (.txt, ...) is tokenized whole once (BOS/EOS as the model's metadata says) and cut
// into windows of ctx + 1 tokens overlapping by one token, so every token but the first is
// a target exactly once (a last window of a single token is dropped).
// An example longer than ctx + 1 tokens is cut to ctx + 1 and counted as truncated; one
// left with no loss token (a prompt that fills the context) is dropped and counted as
// skipped. A malformed line is a fucina::Error(InvalidFile) "FILE:LINE: why".
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::train {

// Training files are read whole; beyond this they are refused (a larger corpus should be
// split, or streamed by a future loader): 1 GiB of text is ~250M tokens.
inline constexpr std::size_t max_dataset_bytes = std::size_t{1} << 30;

struct Example {
  std::vector<std::int32_t> tokens;  // at most ctx + 1 tokens (inputs tokens[0..n-2], targets tokens[1..n-1])
  std::vector<std::uint8_t> loss;    // loss[i] = 1: tokens[i] is a target (loss[0] is always 0)
};

struct DatasetStats {
  std::int64_t examples = 0, tokens = 0, loss_tokens = 0;
  std::int64_t truncated = 0, skipped = 0;  // at loading (split_validation keeps them with the training part)
};

struct Dataset {
  std::vector<Example> examples;
  DatasetStats stats;
};

// Note [Training data formats]. `model_file` supplies the chat template, `tok` the tokens;
// ctx >= 1. Errors: Io / InvalidArgument for an unreadable, oversized or empty file,
// InvalidFile "FILE:LINE: why" for a bad line.
Dataset load_dataset(const std::filesystem::path& path, const gguf::Reader& model_file, const tokenizer::Tokenizer& tok,
                     std::int64_t ctx);

// Deterministic hold-out of `fraction` (0 <= fraction < 1) of the examples: round(fraction
// * n) of them, at least 1 when fraction > 0, chosen by a seeded shuffle; both parts keep
// the file order. Returns {train, validation}. InvalidArgument when nothing would be left to
// train on or the fraction is out of range.
std::pair<Dataset, Dataset> split_validation(Dataset all, double fraction, std::uint64_t seed);

}  // namespace fucina::train
