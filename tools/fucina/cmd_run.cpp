// fucina run: generate text from a GGUF model. stdout carries exactly the completion
// (plus the prompt with --echo); logs and speed go to stderr. The loop itself is the
// library's generate::Generator (Note [Generation loop]).
#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "default_model.hpp"
#include "command.hpp"
#include "fucina/core/atomic_file.hpp"
#include "fucina/generate/chat.hpp"
#include "fucina/generate/batch_generator.hpp"
#include "fucina/generate/generator.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/model/model.hpp"
#include "fucina/model/trainable.hpp"
#include "fucina/sample/sampler.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "input.hpp"

namespace {

using fucina::cli::UsageError;
using fucina::cli::parse_load_flag;
using fucina::cli::parse_kv_flag;
using fucina::cli::parse_num;
using fucina::cli::parse_threads;
using fucina::cli::read_input_file;
namespace tk = fucina::tokenizer;
namespace gen = fucina::generate;

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
    "  --grammar TEXT           constrain the output to a GBNF grammar (llama.cpp syntax;\n"
    "                           start rule 'root')\n"
    "  --grammar-file FILE      the same, read from FILE\n"
    "  --json-schema TEXT       constrain the output to JSON valid under a JSON Schema\n"
    "  --json-schema-file FILE  the same, read from FILE\n"
    "  --json                   constrain the output to any JSON value\n"
    "                           (one of these five; a cut at -n reports stop: length)\n"
    "  -t, --threads N          worker threads (default: all cores)\n"
    "  -c, --ctx N              context length (default: the model's)\n"
    "  -b, --batch N            prompt batch size (default 512)\n"
    "  --kv-type f16|f32|q8_0   KV cache element type (default f16; also -ctk/-ctv T)\n"
    "  --lora FILE              apply a LoRA adapter (llama.cpp's GGUF format), unmerged\n"
    "                           (repeatable)\n"
    "  --lora-scaled FILE S     apply an adapter with user scale S (repeatable)\n"
    "  --lora-scale S           the user scale of the --lora adapters (default 1)\n"
    "  --dump-logits FILE       write the last prompt position's logits (little-endian f32)\n"
    "  --echo                   print the prompt before the completion\n"
    "  --no-parse-special       treat special-token text in the prompt as plain text\n"
    "  --fast-prefill           quantized prompts through the f32 GEMM: faster, not bit-exact\n"
    "                           with llama.cpp\n"
    "  --no-repack              use the weights in the mapped file as they are (no interleaved\n"
    "                           quantized layout, no huge-page copy)\n"
    "  --chat                   apply the model's chat template (ChatML when it has none);\n"
    "                           -p is the user message\n"
    "  --system TEXT            system message for --chat and -i\n"
    "  -i, --interactive        chat loop: read user messages from stdin (one per line;\n"
    "                           end a line with \\ to continue it; EOF or /exit ends)\n"
    "  --parallel N             -f FILE holds one prompt per line: generate for all of them,\n"
    "                           N at a time in one batch, and print each result labelled\n"
    "                           (the KV cache holds N contexts of --ctx)\n"
    "  --jsonl                  with --parallel: print one JSON object per prompt instead\n";

constexpr std::string_view no_model =
    "fucina run: no model given, and no default model found ($FUCINA_MODEL unset, no\n"
    "fucina-default.gguf in <bin>/../share/fucina or the source tree's models/; see\n"
    "docs/DEFAULT-MODEL.md).\n"
    "usage: fucina run MODEL.gguf -p PROMPT   (fucina run --help for options)\n"
    "Models: any llama / qwen3 / qwen3moe GGUF (f32, f16, bf16 or ggml-quantized weights), e.g.\n"
    "from Hugging Face (Qwen/Qwen3-0.6B-GGUF, TinyLlama GGUFs).\n"
    "No model at hand? Make a tiny random-weight one of a real architecture (its text is\n"
    "gibberish by design; see fucina synth --help for the shapes and --vocab to copy a\n"
    "real tokenizer):\n"
    "  fucina synth tiny.gguf --arch qwen3 --hidden 256 --layers 4 --heads 4 --kv-heads 2 --ffn 768 --dtype f16 \\\n"
    "    && fucina run tiny.gguf -p \"Hello\"\n";

struct Options {
  std::string model, prompt, prompt_file, dump_logits;
  std::string system;
  bool have_prompt = false, echo = false, parse_special = true, ignore_eos = false;
  bool chat = false, interactive = false, jsonl = false;
  std::int64_t parallel = 0;  // > 0: one prompt per line of -f, batched
  fucina::model::LoadOptions load;
  std::int64_t n_predict = 128, ctx = 0, batch = 512;
  int threads = 0;
  bool have_seed = false;
  fucina::cli::KvFlags kv;
  fucina::sample::SamplerConfig sampling;
  gen::SpeculativeOptions speculative;
  std::vector<std::string> stops;
  std::vector<std::pair<std::string, float>> loras;  // path, user scale (NaN: --lora-scale)
  float lora_scale = 1.f;
  // --grammar/--grammar-file/--json-schema/--json-schema-file/--json: which one, its text.
  std::string constraint_flag, constraint;
  std::shared_ptr<const fucina::grammar::Grammar> grammar;
};

// Records the one output constraint; a second one is a usage error.
void set_constraint(Options& o, std::string_view flag, std::string text) {
  if (!o.constraint_flag.empty())
    throw UsageError{fmt::format("{} and {} both constrain the output; give one", o.constraint_flag, flag)};
  o.constraint_flag = std::string(flag);
  o.constraint = std::move(text);
}

// The grammar of the constraint flag (before the model loads: a bad grammar fails fast).
std::shared_ptr<const fucina::grammar::Grammar> constraint_grammar(const Options& o) {
  namespace gr = fucina::grammar;
  const std::string& f = o.constraint_flag;
  if (f.empty()) return nullptr;
  if (f == "--json") return std::make_shared<const gr::Grammar>(gr::parse_gbnf(gr::any_json_gbnf()));
  if (f == "--grammar" || f == "--grammar-file") return std::make_shared<const gr::Grammar>(gr::parse_gbnf(o.constraint));
  std::vector<std::string> warnings;
  auto g = std::make_shared<const gr::Grammar>(gr::from_json_schema_text(o.constraint, &warnings));
  for (const auto& w : warnings) fmt::print(stderr, "fucina run: warning: JSON schema {}\n", w);
  return g;
}

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
    else if (a == "--grammar" || a == "--json-schema") set_constraint(o, a, value());
    else if (a == "--grammar-file" || a == "--json-schema-file") set_constraint(o, a, read_input_file(value()));
    else if (a == "--json") set_constraint(o, a, {});
    else if (a == "-t" || a == "--threads") o.threads = parse_threads(a, value());
    else if (a == "-c" || a == "--ctx") o.ctx = parse_num<std::int64_t>(a, value());
    else if (a == "-b" || a == "--batch") o.batch = parse_num<std::int64_t>(a, value());
    else if (a == "--dump-logits") o.dump_logits = value();
    else if (a == "--lora") o.loras.emplace_back(value(), std::numeric_limits<float>::quiet_NaN());
    else if (a == "--lora-scaled") {
      std::string file = value();
      o.loras.emplace_back(std::move(file), parse_num<float>(a, value()));
    } else if (a == "--lora-scale") o.lora_scale = parse_num<float>(a, value());
    else if (a == "--echo") o.echo = true;
    else if (a == "--no-parse-special") o.parse_special = false;
    else if (a == "--chat") o.chat = true;
    else if (parse_load_flag(args, i, o.load)) {}  // --fast-prefill, --no-repack, --moe-*
    else if (a == "--system") o.system = value();
    else if (a == "-i" || a == "--interactive") o.interactive = true;
    else if (a == "--parallel") {
      o.parallel = parse_num<std::int64_t>(a, value());
      if (o.parallel < 1) throw UsageError{fmt::format("--parallel must be at least 1, got {}", o.parallel)};
    }
    else if (a == "--jsonl") o.jsonl = true;
    else if (fucina::cli::parse_spec_flag(args, i, o.speculative)) {}  // --spec, --draft-max, --draft-min
    else if (parse_kv_flag(a, value, o.kv)) {  // --kv-type, -ctk, -ctv
    } else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina run --help)", a)};
    else if (o.model.empty()) o.model = std::string(a);
    else throw UsageError{fmt::format("unexpected argument '{}' (see fucina run --help)", a)};
  }
  if (o.ctx < 0) throw UsageError{fmt::format("--ctx must be positive, got {}", o.ctx)};
  if (o.batch < 1) throw UsageError{fmt::format("--batch must be at least 1, got {}", o.batch)};
  if (o.n_predict < -1) throw UsageError{fmt::format("-n must be >= -1, got {}", o.n_predict)};
  if (o.parallel > 0 && (o.prompt_file.empty() || o.have_prompt))
    throw UsageError{"--parallel reads its prompts from -f FILE (one per line), not -p"};
  if (o.parallel > 0 && (o.interactive || o.echo || !o.dump_logits.empty()))
    throw UsageError{"--parallel does not combine with -i, --echo or --dump-logits"};
  if (o.jsonl && o.parallel == 0) throw UsageError{"--jsonl needs --parallel N"};
  fucina::cli::check_spec_flags(o.speculative);
  return o;
}

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// Generation settings from the flags; the completion streams to stdout as it is made.
gen::Request request_of(const Options& o) {
  return {.max_tokens = o.n_predict,
          .stops = o.stops,
          .ignore_eos = o.ignore_eos,
          .cancel = nullptr,
          .grammar = o.grammar,
          .on_step = [](const gen::Step& step) { write_out(step.text); }};
}

// Feeds a prompt, pointing at --ctx when it does not fit.
void feed(gen::Generator& g, std::span<const tk::TokenId> ids) {
  try {
    g.feed_prompt(ids);
  } catch (const fucina::Error& e) {
    if (e.code() != fucina::ErrorCode::InvalidArgument) throw;
    throw fucina::Error(e.code(), fmt::format("{} (raise --ctx)", e.what()));
  }
}

void print_speed(const gen::Result& g) {
  const auto& t = g.timings;
  const auto per_second = [](std::int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  fmt::print(stderr,
             "\nfucina run: prompt {} tokens in {:.1f} ms ({:.1f} tok/s); generated {} tokens in {:.1f} ms ({:.1f} tok/s); "
             "stop: {}\n",
             t.prompt_tokens, t.prompt_seconds * 1e3, per_second(t.prompt_tokens, t.prompt_seconds), t.gen_tokens,
             t.gen_seconds * 1e3, per_second(t.gen_tokens, t.gen_seconds), gen::to_string(g.reason));
  if (t.grammar_seconds > 0) fmt::print(stderr, "fucina run: grammar {:.1f} ms of the generation\n", t.grammar_seconds * 1e3);
  if (t.verify_steps > 0)
    fmt::print(stderr, "fucina run: speculative: {} verifications, {} of {} drafted tokens accepted ({:.2f} per verification)\n",
               t.verify_steps, t.accepted, t.drafted, static_cast<double>(t.accepted) / static_cast<double>(t.verify_steps));
}

// Reads one user message from stdin: a line, continued while it ends with a backslash.
std::optional<std::string> read_user_message() {
  std::string msg, line;
  fmt::print(stderr, "\n> ");
  std::fflush(stderr);
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      msg += line + "\n";
      continue;
    }
    msg += line;
    return msg;
  }
  if (!msg.empty()) return msg;
  return std::nullopt;
}

// Each turn feeds the whole conversation rendered again; the generator runs only the
// tokens its cache does not hold yet (Note [Generation loop]).
void interactive_loop(const Options& o, const fucina::model::Model& model, const tk::Tokenizer& tok, gen::Generator& g,
                      std::vector<tk::ChatMessage> messages, bool have_first) {
  fmt::print(stderr, "fucina run: interactive chat; end a line with \\ to continue it, /exit or EOF to quit\n");
  while (true) {
    if (!have_first) {
      const auto msg = read_user_message();
      if (!msg || *msg == "/exit") break;
      if (msg->empty()) continue;
      messages.push_back({"user", *msg});
    }
    have_first = false;
    try {
      feed(g, tok.encode(gen::render_chat(model.file(), tok, messages, true), {.add_special = true, .parse_special = true}));
    } catch (const fucina::Error& e) {
      fmt::print(stderr, "fucina run: {}; ending the chat\n", e.what());
      break;
    }
    const auto r = g.generate(request_of(o));
    messages.push_back({"assistant", r.text});
    print_speed(r);
    if (r.reason == gen::StopReason::ContextFull) {
      fmt::print(stderr, "fucina run: the context is full; ending the chat (raise --ctx)\n");
      break;
    }
  }
}

// --parallel: every line of the file is a prompt (--chat: a user message); the results
// print in file order once all are done, labelled or as JSON lines.
int run_parallel(const Options& o, const fucina::model::Model& model, const tk::Tokenizer& tok, fucina::Context& ctx,
                 std::int64_t n_ctx) {
  std::vector<std::string> prompts;
  std::istringstream lines(read_input_file(o.prompt_file));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) prompts.push_back(line);
  if (prompts.empty()) throw UsageError{fmt::format("{} holds no prompts (one per line)", o.prompt_file)};
  gen::BatchGenerator b(model, tok, ctx,
                        {.n_parallel = o.parallel, .n_ctx = n_ctx, .n_batch = std::max(o.batch, o.parallel), .kv_type = o.kv.type,
                         .sampling = o.sampling, .speculative = o.speculative});
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<tk::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", prompts[i]});
    const std::string text = o.chat ? gen::render_chat(model.file(), tok, messages, true) : prompts[i];
    const auto ids = tok.encode(text, {.add_special = true, .parse_special = o.chat || o.parse_special});
    if (ids.empty()) throw UsageError{fmt::format("prompt {} encodes to no tokens", i + 1)};
    try {
      b.add(ids, {.max_tokens = o.n_predict, .stops = o.stops, .ignore_eos = o.ignore_eos});
    } catch (const fucina::Error& e) {
      if (e.code() != fucina::ErrorCode::InvalidArgument) throw;
      throw fucina::Error(e.code(), fmt::format("prompt {}: {} (raise --ctx)", i + 1, e.what()));
    }
  }
  const auto t0 = clock_type::now();
  const auto results = b.run();
  const double seconds = seconds_since(t0);
  std::int64_t prompt_tokens = 0, gen_tokens = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const gen::Result& r = results[i];
    prompt_tokens += r.timings.prompt_tokens;
    gen_tokens += r.timings.gen_tokens;
    if (o.jsonl) {
      const nlohmann::json line{{"index", i},
                                {"prompt", prompts[i]},
                                {"text", r.text},
                                {"prompt_tokens", r.timings.prompt_tokens},
                                {"tokens", r.timings.gen_tokens},
                                {"stop", gen::to_string(r.reason)}};
      write_out(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    } else {
      write_out(fmt::format("--- [{}] {}\n{}\n", i + 1, prompts[i], r.text));
    }
  }
  fmt::print(stderr, "fucina run: {} prompts, {} at a time: {} prompt + {} generated tokens in {:.1f} ms ({:.1f} tok/s)\n",
             results.size(), o.parallel, prompt_tokens, gen_tokens, seconds * 1e3,
             seconds > 0 ? static_cast<double>(prompt_tokens + gen_tokens) / seconds : 0.0);
  return 0;
}

int run_main(std::span<char* const> args) {
  for (const char* a : args)
    if (std::string_view(a) == "-h" || std::string_view(a) == "--help") {
      fmt::print("{}{}{}", usage, fucina::cli::spec_help, fucina::cli::moe_stream_help);
      return 0;
    }
  Options o = parse(args);
  if (o.model.empty()) {  // Note [Default model lookup]
    const auto found = fucina::cli::find_default_model();
    if (!found) {
      fmt::print(stderr, "{}", no_model);
      return 2;
    }
    o.model = found->string();
    fmt::print(stderr, "fucina run: no model given; using the default model {} (docs/DEFAULT-MODEL.md)\n", o.model);
  }
  if (!o.dump_logits.empty()) fucina::check_output_path(o.dump_logits, {o.model});  // before the model loads
  if (!o.prompt_file.empty() && o.parallel == 0) {
    o.prompt = read_input_file(o.prompt_file);
    o.have_prompt = true;
  }
  if (!o.have_prompt && !o.interactive && o.parallel == 0) throw UsageError{"missing -p PROMPT (or -f FILE, or -i for a chat)"};
  if (!o.system.empty() && !o.chat && !o.interactive) throw UsageError{"--system needs --chat or -i"};
  if (!o.have_seed) o.sampling.seed = std::random_device{}();
  fucina::sample::validate(o.sampling);
  o.grammar = constraint_grammar(o);

  const auto t_load = clock_type::now();
  fucina::Context ctx({.threads = o.threads});  // before the model: it holds the adapters ctx allocates
  auto model = fucina::model::Model::load(o.model, o.load);
  for (const auto& [path, scale] : o.loras)
    fucina::model::apply_lora_file(ctx, model, path, std::isnan(scale) ? o.lora_scale : scale);
  const tk::Tokenizer tok(tk::load_tokenizer_data(model.file()));
  const auto& cfg = model.config();
  const std::int64_t n_ctx = o.ctx > 0 ? o.ctx : cfg.n_ctx_train;
  if (o.parallel > 0) return run_parallel(o, model, tok, ctx, n_ctx);
  // The cache first: a context too large for the machine is then the only line printed.
  gen::Generator g(model, tok, ctx,
                   {.n_ctx = n_ctx, .kv_type = o.kv.type, .n_batch = o.batch, .sampling = o.sampling, .speculative = o.speculative});
  fmt::print(stderr, "fucina run: {} ({}, {} layers, embd {}, vocab {}), ctx {}, {} threads, seed {}, load {:.0f} ms\n",
             cfg.name.empty() ? o.model : cfg.name, fucina::model::arch_name(cfg.arch), cfg.n_layer, cfg.n_embd,
             cfg.n_vocab, n_ctx, ctx.threads(), o.sampling.seed, seconds_since(t_load) * 1e3);
  std::vector<tk::ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  if (o.have_prompt && (o.chat || o.interactive)) messages.push_back({"user", o.prompt});
  if (o.interactive) {
    interactive_loop(o, model, tok, g, messages, o.have_prompt);
    return 0;
  }

  const std::string prompt = o.chat ? gen::render_chat(model.file(), tok, messages, true) : o.prompt;
  const auto ids = tok.encode(prompt, {.add_special = true, .parse_special = o.chat || o.parse_special});
  if (o.echo) write_out(prompt);
  if (ids.empty()) throw UsageError{"the prompt encodes to no tokens"};
  feed(g, ids);
  if (!o.dump_logits.empty()) fucina::write_file_atomic(o.dump_logits, std::as_bytes(g.logits()));
  print_speed(g.generate(request_of(o)));
  return 0;
}

const fucina::cli::Command reg{"run", "generate text from a GGUF model (llama, qwen3, qwen3moe)", run_main};

}  // namespace
