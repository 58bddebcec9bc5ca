// The HTTP layer of `fucina serve` (Note [Request flow] below).
#include "fucina/serve/server.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "fucina/core/error.hpp"
#include "fucina/generate/chat.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/serve/protocol.hpp"

namespace fucina::serve {

// Note [Request flow]
// A completion request is checked (protocol.hpp), rendered and tokenized on the HTTP
// thread, then handed to the Engine as one Job per choice. The jobs report into an
// Exchange (text so far, log-probabilities, outcome) that the HTTP thread reads: it waits
// for all choices (plain response) or forwards what arrives as SSE chunks (stream). The
// Exchange is shared, so a job that outlives its request (timed out, client gone) writes
// into it harmlessly. Cancelling (timeout, or a failed write: the client left) sets the
// Exchange's flag, which the engine reads before each token. Every request is logged and
// counted once, by httplib's logger, from a per-thread record (httplib serves one
// request on one thread from routing to the last byte written).

namespace {

using clock_type = std::chrono::steady_clock;

// What the log line and /metrics learn about the request this thread serves.
struct RequestRecord {
  clock_type::time_point start = clock_type::now();
  std::int64_t tokens = 0;  // generated
};
thread_local RequestRecord current_request;

// Time depends on the length of `given` only, never on where it differs from `key`.
bool equal_constant_time(std::string_view given, std::string_view key) {
  if (key.empty()) return false;
  volatile unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff = diff | static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return diff == 0;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_json(e));
}

std::string finish_reason_of(generate::StopReason r) {
  return r == generate::StopReason::Length || r == generate::StopReason::ContextFull ? "length" : "stop";
}

TokenLogprob logprob_of(const tokenizer::Tokenizer& tok, std::span<const float> logits, tokenizer::TokenId token, int top_n) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const double lse = mx + std::log(sum);
  TokenLogprob lp{.piece = std::string(tok.piece(token)), .logprob = static_cast<float>(logits[token] - lse), .top = {}};
  if (top_n > 0) {
    std::vector<std::int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(top_n), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
    for (std::size_t i = 0; i < n; ++i)
      lp.top.emplace_back(std::string(tok.piece(ids[i])), static_cast<float>(logits[ids[i]] - lse));
  }
  return lp;
}

// One request's choices as the engine fills them in (Note [Request flow]).
struct Exchange {
  struct Slot {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::size_t sent_text = 0, sent_logprobs = 0;  // streamed so far
    bool done = false, finished = false;           // finished: its last chunk was sent
    JobOutcome outcome;
    bool has_unsent() const { return text.size() > sent_text || logprobs.size() > sent_logprobs; }
  };
  explicit Exchange(int n) : slots(static_cast<std::size_t>(n)) {}
  bool all_done() const {
    return std::all_of(slots.begin(), slots.end(), [](const Slot& s) { return s.done; });
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> cancel{false};
  std::vector<Slot> slots;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  httplib::Server http;
  std::mutex backend_mutex;
  std::shared_ptr<const Backend> backend;  // null while loading
  std::mutex metrics_mutex;
  std::map<int, std::int64_t> requests_by_status;
  mutable std::mutex id_mutex;
  mutable std::mt19937_64 id_rng{std::random_device{}()};

  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  std::shared_ptr<const Backend> ready() {
    std::lock_guard lock(backend_mutex);
    return backend;
  }

  std::string random_hex(std::size_t n) const {
    std::lock_guard lock(id_mutex);
    std::string s;
    while (s.size() < n) s += fmt::format("{:016x}", id_rng());
    return s.substr(0, n);
  }

  void install();
  bool admit(const httplib::Request& req, httplib::Response& res);
  void log(const httplib::Request& req, const httplib::Response& res);
  void complete(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  std::vector<tokenizer::TokenId> prompt_of(const Backend& b, const CompletionRequest& r) const;
  void respond_whole(const CompletionRequest& r, const ResponseMeta& meta, const std::shared_ptr<Exchange>& ex,
                     const Backend& b, std::int64_t prompt_tokens, httplib::Response& res) const;
  void respond_stream(const CompletionRequest& r, const ResponseMeta& meta, std::shared_ptr<Exchange> ex,
                      const Backend& b, std::int64_t prompt_tokens, httplib::Response& res) const;
  std::string stream_events(const CompletionRequest& r, const ResponseMeta& meta, const Backend& b, Exchange& ex,
                            std::int64_t prompt_tokens, bool& all_finished) const;
  Choice final_choice(const CompletionRequest& r, const Backend& b, const Exchange::Slot& s) const;
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void metrics(httplib::Response& res);
  clock_type::time_point deadline() const {
    return current_request.start + std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout_seconds * 1e3));
  }
};

namespace {

// tool_choice "required" (or a named function) as a grammar: one call to one of the tools
// (or the named one), its arguments constrained to the tool's parameter schema, in the
// syntax of the template (Hermes/Qwen3 <tool_call> ... </tool_call>, or Llama 3's bare JSON
// with "parameters"), which parse_tool_calls reads back.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(const nlohmann::ordered_json& body, ToolCallFormat format) {
  std::string only;
  if (const auto& c = body.at("tool_choice"); c.is_object()) only = c.at("function").at("name").get<std::string>();
  const char* args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const auto& t : body.at("tools")) {
    const auto& f = t.at("function");
    const std::string name = f.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    nlohmann::ordered_json params = f.contains("parameters") && f.at("parameters").is_object()
                                        ? f.at("parameters")
                                        : nlohmann::ordered_json{{"type", "object"}};
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                     {"required", {"name", args_key}},
                     {"additionalProperties", false}});
  }
  if (calls.empty()) throw ApiError(400, fmt::format("tool_choice names '{}', which is not in tools", only), "tool_choice", "invalid_value");
  const nlohmann::ordered_json schema = calls.size() == 1 ? calls[0] : nlohmann::ordered_json{{"anyOf", calls}};
  try {
    std::string gbnf = grammar::json_schema_to_gbnf(schema);
    if (format == ToolCallFormat::Llama3) return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
    gbnf += "\ntool-call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n";
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf, "tool-call"));
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("a tool's parameters: {}", e.what()), "tools", "invalid_value");
  }
}

// The grammar a request asks for (docs/GRAMMAR.md): response_format json_object any JSON
// object, json_schema its schema (read from the raw body, so properties keep their order),
// tool_choice "required" a tool call; null for none. A schema the converter refuses is a
// 400 naming it.
std::shared_ptr<const grammar::Grammar> constraint_of(const CompletionRequest& r, std::string_view body,
                                                      ToolCallFormat format) {
  if (r.tool_choice == ToolChoice::Required) {
    if (r.tools_json.empty()) throw ApiError(400, "tool_choice \"required\" needs tools", "tool_choice", "invalid_value");
    return tool_call_grammar(nlohmann::ordered_json::parse(body), format);
  }
  if (r.response_format == ResponseFormat::JsonObject)
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::any_json_gbnf(/*object_only=*/true)));
  if (r.response_format != ResponseFormat::JsonSchema) return nullptr;
  const auto schema = nlohmann::ordered_json::parse(body).at("response_format").at("json_schema").at("schema");
  try {
    return std::make_shared<const grammar::Grammar>(grammar::from_json_schema(schema));
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("response_format.json_schema.schema: {}", e.what()), "response_format", "invalid_value");
  }
}

}  // namespace

std::vector<tokenizer::TokenId> Server::Impl::prompt_of(const Backend& b, const CompletionRequest& r) const {
  if (!r.prompt_tokens.empty()) {
    for (const auto id : r.prompt_tokens)
      if (static_cast<std::size_t>(id) >= b.tok->vocab_size())
        throw ApiError(400, fmt::format("token id {} is outside the vocabulary ({} tokens)", id, b.tok->vocab_size()),
                       "prompt", "invalid_value");
    return r.prompt_tokens;
  }
  std::string text = r.prompt;
  if (r.endpoint == Endpoint::Chat) {
    try {
      text = generate::render_chat(b.chat_template, *b.tok, r.messages, true, r.tools_json);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages", "invalid_value");
    }
  }
  auto ids = b.tok->encode(text, {.add_special = true, .parse_special = true});
  if (ids.empty()) throw ApiError(400, "the prompt encodes to no tokens", r.endpoint == Endpoint::Chat ? "messages" : "prompt");
  const auto n_ctx = b.engine->context_length();
  if (static_cast<std::int64_t>(ids.size()) >= n_ctx)
    throw ApiError(400, fmt::format("the prompt has {} tokens, the context holds {}", ids.size(), n_ctx),
                   r.endpoint == Endpoint::Chat ? "messages" : "prompt", "context_length_exceeded");
  return ids;
}

Choice Server::Impl::final_choice(const CompletionRequest& r, const Backend& b, const Exchange::Slot& s) const {
  Choice c{.text = s.text, .tool_calls = {}, .finish_reason = finish_reason_of(s.outcome.result.reason), .logprobs = s.logprobs};
  if (!r.tools_json.empty())
    if (auto parsed = parse_tool_calls(s.text, tool_call_format_of(b.chat_template))) {
      c.text = std::move(parsed->content);
      c.tool_calls = std::move(parsed->calls);
      for (auto& call : c.tool_calls) call.id = "call_" + random_hex(24);
      c.finish_reason = "tool_calls";
    }
  return c;
}

void Server::Impl::complete(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  const auto b = ready();
  const CompletionRequest r = parse_request(endpoint, parse_body(req.body));
  const auto constraint = constraint_of(r, req.body, tool_call_format_of(b->chat_template));
  auto prompt = prompt_of(*b, r);
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  const std::uint64_t seed = r.seed ? *r.seed : std::random_device{}();
  auto ex = std::make_shared<Exchange>(r.n);
  std::vector<Job> jobs;
  for (int i = 0; i < r.n; ++i) {
    sample::SamplerConfig sampling = r.sampling;
    sampling.seed = seed + static_cast<std::uint64_t>(i);
    const tokenizer::Tokenizer* tok = b->tok;
    const bool logprobs = r.logprobs, ignore_eos = r.ignore_eos;
    const int top = r.top_logprobs;
    auto& slot = ex->slots[static_cast<std::size_t>(i)];
    generate::Request request{.max_tokens = r.max_tokens,
                              .sampling = sampling,
                              .stops = r.stops,
                              .ignore_eos = r.ignore_eos,
                              .cancel = &ex->cancel,
                              .grammar = constraint,
                              .on_step = [ex, &slot, tok, logprobs, ignore_eos, top](const generate::Step& step) {
                                std::optional<TokenLogprob> lp;
                                if (logprobs && step.token != tokenizer::null_token && !step.logits.empty() &&
                                    (ignore_eos || !tok->is_eog(step.token)))
                                  lp = logprob_of(*tok, step.logits, step.token, top);
                                std::lock_guard lock(ex->mutex);
                                slot.text += step.text;
                                if (lp) slot.logprobs.push_back(std::move(*lp));
                                ex->changed.notify_all();
                              }};
    jobs.push_back({.prompt = prompt,
                    .request = std::move(request),
                    .on_done = [ex, &slot](const JobOutcome& out) {
                      std::lock_guard lock(ex->mutex);
                      slot.outcome = out;
                      slot.done = true;
                      ex->changed.notify_all();
                    }});
  }
  if (!b->engine->submit(std::move(jobs)))
    throw ApiError(429, "the server is busy (the queue is full); retry later", {}, "queue_full");
  const ResponseMeta meta{.endpoint = endpoint,
                          .id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24),
                          .model = b->model_id,
                          .created = static_cast<std::int64_t>(std::time(nullptr)),
                          .logprobs = r.logprobs};
  if (r.stream) respond_stream(r, meta, std::move(ex), *b, prompt_tokens, res);
  else respond_whole(r, meta, ex, *b, prompt_tokens, res);
}

namespace {

ApiError timed_out(double seconds) {
  return ApiError(503, fmt::format("the request timed out after {} s (--timeout)", seconds), {}, "timeout");
}

// A job's failure as the client sees it (the prompt was checked before, so this is rare).
ApiError failed(const JobOutcome& o) { return ApiError(500, fmt::format("generation failed: {}", o.error), {}, "internal"); }

}  // namespace

void Server::Impl::respond_whole(const CompletionRequest& r, const ResponseMeta& meta, const std::shared_ptr<Exchange>& ex,
                                 const Backend& b, std::int64_t prompt_tokens, httplib::Response& res) const {
  std::unique_lock lock(ex->mutex);
  if (!ex->changed.wait_until(lock, deadline(), [&] { return ex->all_done(); })) {
    ex->cancel = true;
    throw timed_out(options.timeout_seconds);
  }
  std::vector<Choice> choices;
  Usage usage{.prompt_tokens = prompt_tokens, .completion_tokens = 0};
  for (const auto& s : ex->slots) {
    if (!s.outcome.error.empty()) throw failed(s.outcome);
    choices.push_back(final_choice(r, b, s));
    usage.completion_tokens += static_cast<std::int64_t>(s.outcome.result.tokens.size());
  }
  current_request.tokens = usage.completion_tokens;
  send_json(res, 200, completion_json(meta, choices, usage));
}

// The SSE events for what the choices produced since the last call (ex.mutex held): text
// deltas (with tools, the whole text waits for the end: a call is only recognized whole),
// each finished choice's last chunk, then usage and [DONE] once all are finished.
std::string Server::Impl::stream_events(const CompletionRequest& r, const ResponseMeta& meta, const Backend& b,
                                        Exchange& ex, std::int64_t prompt_tokens, bool& all_finished) const {
  std::string out;
  for (std::size_t i = 0; i < ex.slots.size(); ++i) {
    auto& s = ex.slots[i];
    const int index = static_cast<int>(i);
    if (s.finished) continue;
    if (r.tools_json.empty() && s.has_unsent()) {
      Choice delta{.text = s.text.substr(s.sent_text), .tool_calls = {}, .finish_reason = {},
                   .logprobs = {s.logprobs.begin() + static_cast<std::ptrdiff_t>(s.sent_logprobs), s.logprobs.end()}};
      out += sse_event(chunk_json(meta, index, delta, false, r.include_usage));
      s.sent_text = s.text.size();
      s.sent_logprobs = s.logprobs.size();
    }
    if (!s.done) continue;
    if (!s.outcome.error.empty()) {
      out += sse_event(error_json(failed(s.outcome)));
    } else {
      Choice last = final_choice(r, b, s);
      if (!r.tools_json.empty() && (!last.text.empty() || !last.tool_calls.empty())) {
        Choice delta{.text = last.text, .tool_calls = last.tool_calls, .finish_reason = {}, .logprobs = {}};
        out += sse_event(chunk_json(meta, index, delta, false, r.include_usage));
      }
      Choice end{.text = {}, .tool_calls = {}, .finish_reason = last.finish_reason, .logprobs = {}};
      out += sse_event(chunk_json(meta, index, end, false, r.include_usage));
    }
    s.finished = true;
  }
  all_finished = std::all_of(ex.slots.begin(), ex.slots.end(), [](const Exchange::Slot& s) { return s.finished; });
  if (all_finished) {
    Usage usage{.prompt_tokens = prompt_tokens, .completion_tokens = 0};
    for (const auto& s : ex.slots) usage.completion_tokens += static_cast<std::int64_t>(s.outcome.result.tokens.size());
    current_request.tokens = usage.completion_tokens;
    if (r.include_usage) out += sse_event(usage_chunk_json(meta, usage));
    out += "data: [DONE]\n\n";
  }
  return out;
}

void Server::Impl::respond_stream(const CompletionRequest& r, const ResponseMeta& meta, std::shared_ptr<Exchange> ex,
                                  const Backend& b, std::int64_t prompt_tokens, httplib::Response& res) const {
  res.set_header("Cache-Control", "no-cache");
  const auto until = deadline();
  // httplib calls the provider until sink.done(); each call waits for news and writes it.
  const auto provide = [this, r, meta, ex, b, prompt_tokens, until, started = false](std::size_t,
                                                                                       httplib::DataSink& sink) mutable {
    std::string out;
    if (!started && meta.endpoint == Endpoint::Chat)
      for (int i = 0; i < r.n; ++i) out += sse_event(chunk_json(meta, i, {}, true, r.include_usage));
    started = true;
    bool all_finished = false, timed_out_now = false;
    {
      std::unique_lock lock(ex->mutex);
      const bool buffered = !r.tools_json.empty();
      const auto news = [&] {
        return std::any_of(ex->slots.begin(), ex->slots.end(), [&](const Exchange::Slot& s) {
          return (s.done && !s.finished) || (!buffered && s.has_unsent());
        });
      };
      // Wake at least every 2 s: a keep-alive comment finds out whether the client is still there.
      if (ex->changed.wait_until(lock, std::min(until, clock_type::now() + std::chrono::seconds(2)), news))
        out += stream_events(r, meta, b, *ex, prompt_tokens, all_finished);
      else if (clock_type::now() >= until)
        timed_out_now = true;
      else
        out += ": keep-alive\n\n";
    }
    if (timed_out_now) {
      ex->cancel = true;
      out += sse_event(error_json(timed_out(options.timeout_seconds))) + "data: [DONE]\n\n";
      all_finished = true;
    }
    if (!sink.write(out.data(), out.size())) {  // the client left
      ex->cancel = true;
      return false;
    }
    if (all_finished) sink.done();
    return true;
  };
  res.set_chunked_content_provider("text/event-stream", provide,
                                   [ex](bool) { ex->cancel = true; });  // however the stream ended, its jobs stop
}

void Server::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
  const auto b = ready();
  const json body = parse_body(req.body);
  const auto it = body.find("content");
  if (it == body.end() || !it->is_string()) throw ApiError(400, "'content' must be a string", "content", "invalid_value");
  const auto flag = [&](const char* name, bool fallback) {
    const auto f = body.find(name);
    if (f == body.end() || f->is_null()) return fallback;
    if (!f->is_boolean()) throw ApiError(400, fmt::format("'{}' must be a boolean", name), name, "invalid_value");
    return f->get<bool>();
  };
  const bool add_special = flag("add_special", false), parse_special = flag("parse_special", true);
  const bool with_pieces = flag("with_pieces", false);
  const auto ids = b->tok->encode(it->get<std::string>(), {.add_special = add_special, .parse_special = parse_special});
  json tokens = json::array();
  for (const auto id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece(b->tok->piece(id));
    const bool utf8 = json(piece).dump(-1, ' ', false, json::error_handler_t::ignore) == json(piece).dump(-1, ' ', false, json::error_handler_t::replace);
    json bytes = json::array();
    for (const unsigned char c : piece) bytes.push_back(c);
    tokens.push_back({{"id", id}, {"piece", utf8 ? json(piece) : bytes}});
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void Server::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
  const auto b = ready();
  const json body = parse_body(req.body);
  const auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens", "invalid_value");
  std::vector<tokenizer::TokenId> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
        t.get<std::int64_t>() >= static_cast<std::int64_t>(b->tok->vocab_size()))
      throw ApiError(400, fmt::format("'tokens' must hold token ids below {}", b->tok->vocab_size()), "tokens", "invalid_value");
    ids.push_back(static_cast<tokenizer::TokenId>(t.get<std::int64_t>()));
  }
  send_json(res, 200, {{"content", b->tok->decode(ids)}});
}

void Server::Impl::metrics(httplib::Response& res) {
  std::string out;
  const auto metric = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  };
  {
    std::lock_guard lock(metrics_mutex);
    out += "# HELP fucina_requests_total HTTP requests answered, by status.\n# TYPE fucina_requests_total counter\n";
    for (const auto& [status, n] : requests_by_status) out += fmt::format("fucina_requests_total{{status=\"{}\"}} {}\n", status, n);
  }
  if (const auto b = ready()) {
    const EngineStats s = b->engine->stats();
    metric("fucina_prompt_tokens_total", "counter", "Prompt tokens run (a reused cached prefix is not run).", s.prompt_tokens);
    metric("fucina_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
    metric("fucina_jobs_total", "counter", "Completions finished (one per choice).", s.jobs_done);
    metric("fucina_queue_depth", "gauge", "Completions waiting for the engine.", s.waiting);
    metric("fucina_running", "gauge", "Completions being generated.", s.running);
    metric("fucina_tokens_per_second", "gauge", "Generated tokens per second the engine was busy, since start.",
           s.busy_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.busy_seconds : 0.0);
    metric("fucina_steps_total", "counter", "Engine steps (each one forward pass over all running sequences).", s.steps);
    metric("fucina_drafted_tokens_total", "counter", "Tokens drafted for speculative verification.", s.drafted_tokens);
    metric("fucina_accepted_tokens_total", "counter", "Drafted tokens that were the tokens sampled.", s.accepted_tokens);
    metric("fucina_kv_blocks_total", "gauge", "KV cache blocks shared by all sequences.", s.kv_blocks_total);
    metric("fucina_kv_blocks_free", "gauge", "KV cache blocks no sequence holds.", s.kv_blocks_free);
  }
  res.set_content(out, "text/plain; version=0.0.4");
}

// Every request but /health needs the key (when one is set); the model's endpoints wait for the model.
bool Server::Impl::admit(const httplib::Request& req, httplib::Response& res) {
  current_request = {};
  if (req.path == "/health") return false;
  if (!options.api_key.empty()) {
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    const bool ok = auth.compare(0, bearer.size(), bearer) == 0 &&
                    equal_constant_time(std::string_view(auth).substr(bearer.size()), options.api_key);
    if (!ok) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", {}, "invalid_api_key"));
      return true;
    }
  }
  if (req.path != "/metrics" && !ready()) {
    send_error(res, ApiError(503, "the model is loading", {}, "loading"));
    return true;
  }
  return false;
}

void Server::Impl::log(const httplib::Request& req, const httplib::Response& res) {
  const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - current_request.start).count();
  {
    std::lock_guard lock(metrics_mutex);
    requests_by_status[res.status] += 1;
  }
  std::fputs(fmt::format("fucina serve: {} {} {} {} tokens {:.1f} ms\n", req.method, req.path, res.status,
                         current_request.tokens, ms).c_str(), stderr);
  current_request = {};
}

void Server::Impl::install() {
  const auto guarded = [](auto body) {
    return [body](const httplib::Request& req, httplib::Response& res) {
      try {
        body(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      }
    };
  };
  for (const char* prefix : {"/v1", ""}) {
    const std::string p = prefix;
    http.Post(p + "/chat/completions", guarded([this](const auto& req, auto& res) { complete(Endpoint::Chat, req, res); }));
    http.Post(p + "/completions", guarded([this](const auto& req, auto& res) { complete(Endpoint::Completion, req, res); }));
    http.Get(p + "/models", [this](const httplib::Request&, httplib::Response& res) {
      const json model = {{"id", ready()->model_id}, {"object", "model"}, {"created", std::time(nullptr)}, {"owned_by", "fucina"}};
      send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
    });
  }
  http.Post("/tokenize", guarded([this](const auto& req, auto& res) { tokenize(req, res); }));
  http.Post("/detokenize", guarded([this](const auto& req, auto& res) { detokenize(req, res); }));
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready()) send_json(res, 200, {{"status", "ok"}});
    else send_error(res, ApiError(503, "the model is loading", {}, "loading"));
  });
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return admit(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib's own refusals (no route, body too large, malformed request) in the error shape.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404   ? "no such endpoint"
                                : res.status == 413 ? "the request body is too large"
                                                    : fmt::format("the request was refused (HTTP {})", res.status);
    send_error(res, ApiError(res.status, message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, fmt::format("internal error: {}", what), {}, "internal"));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log(req, res); });
  http.set_payload_max_length(options.max_body);
  http.set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server bind a
  // port that is in use and silently share its connections.
  http.set_socket_options([](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });  // stream chunks go out as they are written (no Nagle delay)
  const auto threads = static_cast<std::size_t>(std::max(1, options.http_threads));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) { impl_->install(); }

Server::~Server() = default;

int Server::bind() {
  const auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) fail(ErrorCode::Io, fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port));
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::set_backend(Backend backend) {
  std::lock_guard lock(impl_->backend_mutex);
  impl_->backend = std::make_shared<const Backend>(std::move(backend));
}

void Server::stop() { impl_->http.stop(); }

}  // namespace fucina::serve
