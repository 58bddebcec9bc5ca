// fucina serve: an OpenAI-compatible HTTP server over one model (docs/SERVER.md). The
// endpoints live in serve::Server, generation in serve::Engine; this file parses the flags,
// listens first (so /health answers 503 while the model loads), loads, and serves until
// SIGINT/SIGTERM.
#include <fmt/core.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <pthread.h>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/error.hpp"
#include "fucina/generate/chat.hpp"
#include "fucina/model/model.hpp"
#include "fucina/model/trainable.hpp"
#include "fucina/serve/engine.hpp"
#include "fucina/serve/server.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "input.hpp"

namespace {

using fucina::cli::UsageError;
using fucina::cli::parse_num;

constexpr std::string_view usage =
    "usage: fucina serve MODEL.gguf [options]\n"
    "  --host ADDR              address to listen on (default 127.0.0.1: this machine only)\n"
    "  --port N                 port (default 8080; 0: any free port, printed)\n"
    "  --parallel N             sequences generated together, one forward pass per step\n"
    "                           (continuous batching, default 4; each holds -c tokens of KV)\n"
    "  --max-queue Q            requests waiting beyond the slots before 429 (default 64)\n"
    "  --timeout S              per-request limit in seconds, queueing included (default 600)\n"
    "  -c, --ctx N              context length of each sequence (default: the model's, at most 4096)\n"
    "  -b, --batch N            tokens per forward pass, all sequences together (default 512)\n"
    "  -t, --threads N          worker threads (default: all cores)\n"
    "  --api-key KEY            require Authorization: Bearer KEY (all but /health)\n"
    "  --api-key-file F         the same, the key read from F (first line)\n"
    "  --chat-template-file F   Jinja chat template to use instead of the model's\n"
    "  --alias NAME             model id in /v1/models and responses (default: file name)\n"
    "  --max-body BYTES         largest request body (default 8388608; more is a 413)\n"
    "  --lora ADAPTER.gguf      apply a LoRA adapter (llama.cpp's GGUF format), unmerged (repeatable)\n"
    "  --lora-scaled FILE S     apply an adapter with user scale S (repeatable)\n"
    "  --fast-prefill           quantized prompts through the f32 GEMM: faster, not bit-exact\n"
    "  --no-repack              use the weights in the mapped file as they are\n";

struct Options {
  std::string model, chat_template_file, alias;
  fucina::serve::ServerOptions server;
  fucina::serve::EngineOptions engine{.slots = 4};
  fucina::model::LoadOptions load;
  std::vector<std::pair<std::string, float>> loras;  // adapter, user scale
  int threads = 0;
};

// -c's default: the model's training context, capped as llama-server's default is, since every
// slot holds a whole context of KV (a 40k-token model at 4 slots would want gigabytes).
constexpr std::int64_t default_ctx_cap = 4096;

std::string first_line(const std::string& text) { return text.substr(0, text.find_first_of("\r\n")); }

Options parse(std::span<char* const> args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&] { return fucina::cli::flag_value(args, i); };
    if (a == "--host") o.server.host = value();
    else if (a == "--port") o.server.port = parse_num<int>(a, value());
    else if (a == "--parallel") o.engine.slots = parse_num<int>(a, value());
    else if (a == "--max-queue") o.engine.max_queue = parse_num<int>(a, value());
    else if (a == "--timeout") o.server.timeout_seconds = parse_num<double>(a, value());
    else if (a == "-c" || a == "--ctx") o.engine.batch.n_ctx = parse_num<std::int64_t>(a, value());
    else if (a == "-b" || a == "--batch") o.engine.batch.n_batch = parse_num<std::int64_t>(a, value());
    else if (a == "-t" || a == "--threads") o.threads = fucina::cli::parse_threads(a, value());
    else if (a == "--api-key") o.server.api_key = value();
    else if (a == "--api-key-file") o.server.api_key = first_line(fucina::cli::read_input_file(value()));
    else if (a == "--chat-template-file") o.chat_template_file = value();
    else if (a == "--alias") o.alias = value();
    else if (a == "--max-body") o.server.max_body = parse_num<std::size_t>(a, value());
    else if (a == "--lora") o.loras.emplace_back(value(), 1.f);
    else if (a == "--lora-scaled") {
      std::string file = value();
      o.loras.emplace_back(std::move(file), parse_num<float>(a, value()));
    }
    else if (a == "-m" || a == "--model") o.model = value();
    else if (fucina::cli::parse_load_flag(args, i, o.load)) {}
    else if (fucina::cli::parse_spec_flag(args, i, o.engine.batch.speculative)) {}  // per sequence
    else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina serve --help)", a)};
    else if (o.model.empty()) o.model = std::string(a);
    else throw UsageError{fmt::format("unexpected argument '{}' (see fucina serve --help)", a)};
  }
  if (o.model.empty()) throw UsageError{"no model given (usage: fucina serve MODEL.gguf, see --help)"};
  if (o.server.port < 0 || o.server.port > 65535) throw UsageError{fmt::format("--port must be 0..65535, got {}", o.server.port)};
  if (o.engine.slots < 1 || o.engine.slots > 256) throw UsageError{fmt::format("--parallel must be 1..256, got {}", o.engine.slots)};
  if (o.engine.max_queue < 0 || o.engine.max_queue > 4096)
    throw UsageError{fmt::format("--max-queue must be 0..4096, got {}", o.engine.max_queue)};
  if (!(o.server.timeout_seconds > 0)) throw UsageError{fmt::format("--timeout must be positive, got {}", o.server.timeout_seconds)};
  if (o.engine.batch.n_ctx < 0) throw UsageError{fmt::format("--ctx must be positive, got {}", o.engine.batch.n_ctx)};
  if (o.engine.batch.n_batch < 1) throw UsageError{fmt::format("--batch must be at least 1, got {}", o.engine.batch.n_batch)};
  fucina::cli::check_spec_flags(o.engine.batch.speculative);
  if (o.server.max_body < 1024) throw UsageError{fmt::format("--max-body must be at least 1024, got {}", o.server.max_body)};
  for (const char* f : {"--api-key", "--api-key-file"})
    for (const auto* arg : args)
      if (std::string_view(arg) == f && o.server.api_key.empty()) throw UsageError{fmt::format("{}: the key is empty", f)};
  // A streamed request holds its connection's thread while it waits in the queue.
  o.server.http_threads = o.engine.slots + o.engine.max_queue + 4;
  return o;
}

int serve_main(std::span<char* const> args) {
  for (const char* a : args)
    if (std::string_view(a) == "-h" || std::string_view(a) == "--help") {
      fmt::print("{}{}{}", usage, fucina::cli::spec_help, fucina::cli::moe_stream_help);
      return 0;
    }
  const Options o = parse(args);
  // Before listening: a wrong path is then the only line printed.
  if (std::error_code ec; !std::filesystem::is_regular_file(o.model, ec))
    throw fucina::Error(fucina::ErrorCode::Io, fmt::format("cannot open model '{}': not a file", o.model));
  const std::string tmpl_override = o.chat_template_file.empty() ? std::string() : fucina::cli::read_input_file(o.chat_template_file);

  // SIGINT/SIGTERM go to one thread, which stops the server; every thread made later inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  fucina::serve::Server server(o.server);
  const int port = server.bind();
  fmt::print(stderr, "fucina serve: listening on http://{}:{}\n", o.server.host, port);
  std::thread http([&] { server.run(); });
  std::thread([&server, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    fmt::print(stderr, "fucina serve: signal {}, stopping\n", sig);
    server.stop();
  }).detach();

  try {
    fucina::Context ctx({.threads = o.threads});  // before the model: it holds the adapters ctx allocates
    auto model = fucina::model::Model::load(o.model, o.load);
    for (const auto& [path, scale] : o.loras) fucina::model::apply_lora_file(ctx, model, path, scale);
    const fucina::tokenizer::Tokenizer tok(fucina::tokenizer::load_tokenizer_data(model.file()));
    const auto& cfg = model.config();
    fucina::serve::EngineOptions engine_options = o.engine;
    if (engine_options.batch.n_ctx == 0) engine_options.batch.n_ctx = std::min(cfg.n_ctx_train, default_ctx_cap);
    fucina::serve::BatchEngine engine(model, tok, ctx, engine_options);
    const std::string id = !o.alias.empty() ? o.alias : std::filesystem::path(o.model).filename().string();
    const std::string tmpl = tmpl_override.empty() ? fucina::generate::chat_template_or_default(model.file()) : tmpl_override;
    // A template this engine cannot run: a --chat-template-file is refused at startup; the
    // model's own only warned about (its completions endpoint still works).
    const fucina::tokenizer::ChatMessage probe[] = {{.role = "user", .content = "Hello"}};
    try {
      (void)fucina::generate::render_chat(tmpl, tok, probe, true);
    } catch (const fucina::Error& e) {
      if (!tmpl_override.empty()) throw fucina::Error(e.code(), fmt::format("--chat-template-file: {}", e.what()));
      fmt::print(stderr, "fucina serve: warning: the model's chat template cannot be used ({}); chat requests will be refused\n", e.what());
    }
    server.set_backend({.model_id = id, .tok = &tok, .chat_template = tmpl, .engine = &engine});
    fmt::print(stderr, "fucina serve: {} ({}, {} layers), ctx {}, {} slot(s), queue {}, {} threads: ready\n", id,
               fucina::model::arch_name(cfg.arch), cfg.n_layer, engine.context_length(), o.engine.slots,
               o.engine.max_queue, ctx.threads());
    http.join();
  } catch (...) {
    server.stop();
    http.join();
    throw;
  }
  return 0;
}

const fucina::cli::Command reg{"serve", "OpenAI-compatible HTTP server (chat, completions, streaming)", serve_main};

}  // namespace
