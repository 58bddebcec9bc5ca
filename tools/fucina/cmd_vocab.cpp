// fucina vocab train: a byte-level BPE vocabulary from text (tokenizer/bpe_trainer.hpp).
#include <fmt/core.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/atomic_file.hpp"
#include "fucina/core/bounded_read.hpp"
#include "fucina/tokenizer/bpe_trainer.hpp"

namespace {

using fucina::cli::flag_value;
using fucina::cli::help_requested;
using fucina::cli::parse_num;
using fucina::cli::UsageError;
namespace tk = fucina::tokenizer;

constexpr std::string_view usage =
    "usage: fucina vocab train CORPUS.txt... -o VOCAB.gguf [--size N] [options]\n"
    "\n"
    "Trains a byte-level BPE vocabulary (GPT-2 style: the 256 bytes, so any input encodes, then\n"
    "the most frequent pairs merged in order) on the corpus files and writes it as GGUF tokenizer\n"
    "metadata (tokenizer.ggml.model = gpt2) that llama.cpp and fucina load: `fucina tokenize\n"
    "VOCAB.gguf TEXT`, `llama-tokenize -m VOCAB.gguf`, and `fucina synth --vocab VOCAB.gguf` to\n"
    "make a model that uses it. The result depends only on the text and the options.\n"
    "\n"
    "options (defaults in brackets):\n"
    "  -o, --output FILE      the vocabulary GGUF (required)\n"
    "  --size N               tokens in all: 256 bytes + merges + special tokens [8192]\n"
    "  --min-frequency N      never merge a pair seen fewer times [2]\n"
    "  --pre NAME             pre-tokenizer, a tokenizer.ggml.pre name llama.cpp knows [gpt-2]\n"
    "  --special TEXT         a control token (repeatable; the first is BOS and EOS)\n"
    "                         [<|endoftext|>]\n"
    "  -h, --help             this help\n";

int vocab_main(std::span<char* const> args) {
  if (args.empty() || help_requested(args[0], usage)) {
    if (args.empty()) throw UsageError{"missing the action: fucina vocab train ... (see fucina vocab --help)"};
    return 0;
  }
  if (std::string_view(args[0]) != "train")
    throw UsageError{fmt::format("unknown action '{}' (the one action is: train)", args[0])};
  tk::BpeTrainOptions opt;
  std::vector<std::filesystem::path> corpus;
  std::string out;
  bool special_given = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (help_requested(a, usage)) return 0;
    if (a == "-o" || a == "--output") out = flag_value(args, i);
    else if (a == "--size") opt.vocab_size = parse_num<std::int64_t>(a, flag_value(args, i));
    else if (a == "--min-frequency") opt.min_frequency = parse_num<std::int64_t>(a, flag_value(args, i));
    else if (a == "--pre") opt.pre = flag_value(args, i);
    else if (a == "--special") {
      if (!special_given) opt.special.clear(), special_given = true;
      opt.special.push_back(flag_value(args, i));
    } else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina vocab --help)", a)};
    else corpus.emplace_back(a);
  }
  if (corpus.empty()) throw UsageError{"no corpus file given (see fucina vocab --help)"};
  if (out.empty()) throw UsageError{"no output given: pass -o VOCAB.gguf"};
  fucina::check_output_path(out, corpus);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> texts;
  std::size_t bytes = 0;
  for (const auto& f : corpus) {
    texts.push_back(fucina::read_file_bounded(f, std::size_t{1} << 30));
    bytes += texts.back().size();
  }
  const tk::TrainedVocab v = tk::train_bpe(texts, opt);
  tk::write_vocab_gguf(out, v);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr, "fucina vocab: {} tokens (256 bytes, {} merges, {} special) from {:.1f} MB of text in {:.1f} s; wrote {}\n",
             v.tokens.size(), v.merges.size(), opt.special.size(), static_cast<double>(bytes) / 1e6, secs, out);
  if (static_cast<std::int64_t>(v.tokens.size()) < opt.vocab_size)
    fmt::print(stderr, "fucina vocab: note: no pair occurs {} times any more: fewer tokens than --size {}\n",
               opt.min_frequency, opt.vocab_size);
  return 0;
}

const fucina::cli::Command reg("vocab", "train a byte-level BPE vocabulary on text (vocab train)", vocab_main);

}  // namespace
