// fucina run: generate text from a GGUF model. stdout carries exactly the completion
// (plus the prompt with --echo); logs and speed go to stderr.
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "fucina/model/model.hpp"
#include "fucina/sample/sampler.hpp"
#include "fucina/sample/stop.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace {

using fucina::cli::UsageError;
using fucina::cli::parse_num;
namespace tk = fucina::tokenizer;

constexpr std::string_view usage =
    "usage: fucina run MODEL.gguf -p PROMPT [options]\n"
    "  -p, --prompt TEXT        prompt text (or -f FILE)\n"
    "  -f, --file FILE          read the prompt from FILE\n"
    "  -n, --n-predict N        tokens to generate (default 128; -1: until EOS or context end)\n"
    "  --temp T                 temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K                top-k (default 40; 0 = off)\n"
    "  --top-p P                top-p (default 0.95; 1 = off)\n"
    "  --min-p P                min-p (default 0.05; 0 = off)\n"
    "  --repeat-penalty F       repetition penalty (default 1 = off)\n"
    "  --repeat-last-n N        penalty window (default 64)\n"
    "  --presence-penalty F     presence penalty (default 0)\n"
    "  --frequency-penalty F    frequency penalty (default 0)\n"
    "  --seed S                 sampling seed (default: random, printed to stderr)\n"
    "  --stop TEXT              stop when TEXT is generated (repeatable; not printed)\n"
    "  --ignore-eos             keep generating after an end-of-generation token\n"
    "  -t, --threads N          worker threads (default: all cores)\n"
    "  -c, --ctx N              context length (default: the model's)\n"
    "  -b, --batch N            prompt batch size (default 512)\n"
    "  --kv-type f16|f32        KV cache element type (default f16)\n"
    "  --dump-logits FILE       write the last prompt position's logits (little-endian f32)\n"
    "  --echo                   print the prompt before the completion\n"
    "  --no-parse-special       treat special-token text in the prompt as plain text\n";

constexpr std::string_view no_model =
    "fucina run: no model given.\n"
    "usage: fucina run MODEL.gguf -p PROMPT   (fucina run --help for options)\n"
    "Models: any llama / qwen3 / qwen3moe GGUF with f32 or f16 weights, e.g. from Hugging Face\n"
    "(Qwen/Qwen3-0.6B-GGUF, TinyLlama GGUFs).\n"
    "No model at hand? Make a tiny random-weight one of a real architecture (its text is\n"
    "gibberish by design; see fucina synth --help for the shapes and --vocab to copy a\n"
    "real tokenizer):\n"
    "  fucina synth tiny.gguf --arch qwen3 --hidden 256 --layers 4 --heads 4 --kv-heads 2 --ffn 768 --dtype f16 \\\n"
    "    && fucina run tiny.gguf -p \"Hello\"\n";

struct Options {
  std::string model, prompt, prompt_file, dump_logits;
  bool have_prompt = false, echo = false, parse_special = true, ignore_eos = false;
  std::int64_t n_predict = 128, ctx = 0, batch = 512;
  int threads = 0;
  bool have_seed = false;
  fucina::DType kv = fucina::DType::f16;
  fucina::sample::SamplerConfig sampling;
  std::vector<std::string> stops;
};

Options parse(std::span<char* const> args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    if (a == "-p" || a == "--prompt") o.prompt = value(), o.have_prompt = true;
    else if (a == "-f" || a == "--file") o.prompt_file = value();
    else if (a == "-m" || a == "--model") o.model = value();
    else if (a == "-n" || a == "--n-predict") o.n_predict = parse_num<std::int64_t>(a, value());
    else if (a == "--temp") o.sampling.temperature = parse_num<float>(a, value());
    else if (a == "--top-k") o.sampling.top_k = parse_num<std::int32_t>(a, value());
    else if (a == "--top-p") o.sampling.top_p = parse_num<float>(a, value());
    else if (a == "--min-p") o.sampling.min_p = parse_num<float>(a, value());
    else if (a == "--repeat-penalty") o.sampling.repeat_penalty = parse_num<float>(a, value());
    else if (a == "--repeat-last-n") o.sampling.penalty_last_n = parse_num<std::int32_t>(a, value());
    else if (a == "--presence-penalty") o.sampling.presence_penalty = parse_num<float>(a, value());
    else if (a == "--frequency-penalty") o.sampling.frequency_penalty = parse_num<float>(a, value());
    else if (a == "--seed") o.sampling.seed = parse_num<std::uint64_t>(a, value()), o.have_seed = true;
    else if (a == "--stop") o.stops.push_back(value());
    else if (a == "--ignore-eos") o.ignore_eos = true;
    else if (a == "-t" || a == "--threads") o.threads = parse_num<int>(a, value());
    else if (a == "-c" || a == "--ctx") o.ctx = parse_num<std::int64_t>(a, value());
    else if (a == "-b" || a == "--batch") o.batch = parse_num<std::int64_t>(a, value());
    else if (a == "--dump-logits") o.dump_logits = value();
    else if (a == "--echo") o.echo = true;
    else if (a == "--no-parse-special") o.parse_special = false;
    else if (a == "--kv-type") {
      const std::string t = value();
      if (t == "f16") o.kv = fucina::DType::f16;
      else if (t == "f32") o.kv = fucina::DType::f32;
      else throw UsageError{fmt::format("--kv-type must be f16 or f32, not '{}'", t)};
    } else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina run --help)", a)};
    else if (o.model.empty()) o.model = std::string(a);
    else throw UsageError{fmt::format("unexpected argument '{}' (see fucina run --help)", a)};
  }
  if (o.threads < 0 || (o.threads == 0 && std::find_if(args.begin(), args.end(), [](const char* s) {
                                             return std::string_view(s) == "-t" || std::string_view(s) == "--threads";
                                           }) != args.end()))
    throw UsageError{fmt::format("--threads must be at least 1, got {}", o.threads)};
  if (o.ctx < 0) throw UsageError{fmt::format("--ctx must be positive, got {}", o.ctx)};
  if (o.batch < 1) throw UsageError{fmt::format("--batch must be at least 1, got {}", o.batch)};
  if (o.n_predict < -1) throw UsageError{fmt::format("-n must be >= -1, got {}", o.n_predict)};
  return o;
}

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

int run_main(std::span<char* const> args) {
  for (const char* a : args)
    if (std::string_view(a) == "-h" || std::string_view(a) == "--help") {
      fmt::print("{}", usage);
      return 0;
    }
  Options o = parse(args);
  if (o.model.empty()) {
    fmt::print(stderr, "{}", no_model);
    return 2;
  }
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) throw fucina::Error(fucina::ErrorCode::Io, fmt::format("cannot open prompt file '{}'", o.prompt_file));
    o.prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    o.have_prompt = true;
  }
  if (!o.have_prompt) throw UsageError{"missing -p PROMPT (or -f FILE)"};
  if (!o.have_seed) o.sampling.seed = std::random_device{}();
  fucina::sample::validate(o.sampling);

  using clock = std::chrono::steady_clock;
  const auto t_load = clock::now();
  const auto model = fucina::model::Model::load(o.model);
  const tk::Tokenizer tok(tk::load_tokenizer_data(model.file()));
  fucina::Context ctx({.threads = o.threads});
  const auto& cfg = model.config();
  const std::int64_t n_ctx = o.ctx > 0 ? o.ctx : cfg.n_ctx_train;
  fmt::print(stderr, "fucina run: {} ({}, {} layers, embd {}, vocab {}), ctx {}, {} threads, seed {}, load {:.0f} ms\n",
             cfg.name.empty() ? o.model : cfg.name, fucina::model::arch_name(cfg.arch), cfg.n_layer, cfg.n_embd,
             cfg.n_vocab, n_ctx, ctx.threads(), o.sampling.seed,
             std::chrono::duration<double, std::milli>(clock::now() - t_load).count());

  const std::vector<std::int32_t> ids = tok.encode(o.prompt, {.add_special = true, .parse_special = o.parse_special});
  if (ids.empty()) throw UsageError{"the prompt encodes to no tokens"};
  if (static_cast<std::int64_t>(ids.size()) >= n_ctx)
    throw fucina::Error(fucina::ErrorCode::InvalidArgument,
                        fmt::format("the prompt has {} tokens, the context holds {} (raise --ctx)", ids.size(), n_ctx));
  auto cache = model.new_cache(ctx, n_ctx, o.kv);
  fucina::sample::Sampler sampler(o.sampling);
  for (auto id : ids) sampler.accept(id);
  if (o.echo) write_out(o.prompt);

  const auto t0 = clock::now();
  auto logits = model.prefill(ctx, cache, ids, o.batch).to_vector();
  const double t_prompt = std::chrono::duration<double>(clock::now() - t0).count();
  if (!o.dump_logits.empty()) {
    std::ofstream f(o.dump_logits, std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!f) throw fucina::Error(fucina::ErrorCode::Io, fmt::format("cannot write '{}'", o.dump_logits));
  }

  tk::StreamDecoder detok(tok);
  fucina::sample::StopMatcher stop(o.stops);
  const auto t1 = clock::now();
  std::int64_t n_gen = 0;
  const std::int64_t limit = o.n_predict < 0 ? n_ctx : o.n_predict;
  std::string reason = "length";
  while (n_gen < limit) {
    const std::int32_t next = sampler.sample(logits);
    sampler.accept(next);
    ++n_gen;
    if (!o.ignore_eos && tok.is_eog(next)) {
      reason = "eos";
      break;
    }
    write_out(stop.push(detok.push(next)));
    if (stop.stopped()) {
      reason = "stop string";
      break;
    }
    if (n_gen == limit) break;
    if (cache.size() >= cache.capacity()) {
      reason = "context full";
      break;
    }
    const std::int32_t one[1] = {next};
    logits = model.forward(ctx, cache, one).to_vector();
  }
  if (!stop.stopped()) write_out(stop.push(detok.flush()) + stop.flush());
  const double t_gen = std::chrono::duration<double>(clock::now() - t1).count();
  fmt::print(stderr, "\nfucina run: prompt {} tokens in {:.1f} ms ({:.1f} tok/s); generated {} tokens in {:.1f} ms ({:.1f} tok/s); stop: {}\n",
             ids.size(), t_prompt * 1e3, static_cast<double>(ids.size()) / t_prompt, n_gen, t_gen * 1e3,
             t_gen > 0 ? static_cast<double>(n_gen) / t_gen : 0.0, reason);
  return 0;
}

const fucina::cli::Command reg{"run", "generate text from a GGUF model (llama, qwen3, qwen3moe)", run_main};

}  // namespace
