// fucina perplexity: a model's perplexity on a text, with llama-perplexity's protocol (Note
// [Perplexity protocol] in train/perplexity.hpp) and its output lines, plus bits per byte.
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "args.hpp"
#include "command.hpp"
#include "input.hpp"
#include "fucina/core/context.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer_data.hpp"
#include "fucina/train/perplexity.hpp"

namespace {

using fucina::cli::flag_value;
using fucina::cli::help_requested;
using fucina::cli::parse_num;
using fucina::cli::UsageError;

constexpr std::string_view usage =
    "usage: fucina perplexity MODEL.gguf -f TEXT.txt [options]\n"
    "\n"
    "The model's perplexity on the text, measured as llama-perplexity measures it: chunks of\n"
    "-c tokens, each from an empty cache with BOS first, the second half of each chunk scored.\n"
    "Prints the running perplexity per chunk ([1]x,[2]y,...), then\n"
    "  Final estimate: PPL = X +/- E\n"
    "and a summary line with the mean negative log-likelihood and the bits per byte.\n"
    "\n"
    "options (defaults in brackets):\n"
    "  -f, --file FILE        the text (required)\n"
    "  -c, --ctx-size N       tokens per chunk [512]\n"
    "  --chunks N             at most N chunks [all]\n"
    "  -t, --threads N        worker threads [all cores]\n"
    "  -h, --help             this help\n";

int perplexity_main(std::span<char* const> args) {
  std::string model_path, file;
  fucina::train::PerplexityOptions opt;
  int threads = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (help_requested(a, usage)) return 0;
    if (a == "-f" || a == "--file") file = flag_value(args, i);
    else if (a == "-c" || a == "--ctx-size") opt.n_ctx = parse_num<std::int64_t>(a, flag_value(args, i));
    else if (a == "--chunks") opt.n_chunks = parse_num<std::int64_t>(a, flag_value(args, i));
    else if (a == "-t" || a == "--threads") threads = fucina::cli::parse_threads(a, flag_value(args, i));
    else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina perplexity --help)", a)};
    else if (model_path.empty()) model_path = a;
    else throw UsageError{fmt::format("unexpected argument '{}' (see fucina perplexity --help)", a)};
  }
  if (model_path.empty()) throw UsageError{"missing MODEL.gguf (see fucina perplexity --help)"};
  if (file.empty()) throw UsageError{"no text given: pass -f TEXT.txt"};
  if (opt.n_chunks == 0) throw UsageError{"--chunks must be at least 1"};

  const std::string text = fucina::cli::read_input_file(file);
  fucina::Context ctx({.threads = threads});
  const auto model = fucina::model::Model::load(model_path);
  const fucina::tokenizer::Tokenizer tok(fucina::tokenizer::load_tokenizer_data(model.file()));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = fucina::train::perplexity(model, tok, ctx, text, opt, [](std::int64_t chunk, double ppl) {
    fmt::print("[{}]{:.4f},", chunk, ppl);
    std::fflush(stdout);
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("\nFinal estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_error);
  fmt::print("{} chunks of {} tokens, {} tokens scored ({} bytes): mean NLL {:.5f} nats/token, {:.4f} bits/byte ({:.1f} s)\n",
             r.chunks, opt.n_ctx, r.scored_tokens, r.scored_bytes, r.mean_nll, r.bits_per_byte, secs);
  return 0;
}

const fucina::cli::Command registered("perplexity", "a model's perplexity on a text (llama-perplexity's protocol)",
                                      perplexity_main);

}  // namespace
