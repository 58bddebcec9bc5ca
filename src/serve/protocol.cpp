#include "fucina/serve/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fucina::serve {
namespace {

std::string type_of_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "server_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

[[noreturn]] void bad(const std::string& param, std::string_view what) {
  throw ApiError(400, fmt::format("'{}' {}", param, what), param, "invalid_value");
}

// A field of a JSON object, null and absent alike.
const json* field(const json& obj, const char* name) {
  const auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, "must be a boolean");
  return v->get<bool>();
}

std::optional<std::int64_t> get_int(const json& obj, const char* name, std::int64_t lo, std::int64_t hi) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, "must be an integer");
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad(name, fmt::format("must be at most {}", hi));
  const auto x = v->get<std::int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("must be between {} and {}", lo, hi));
  return x;
}

std::optional<float> get_number(const json& obj, const char* name, double lo, double hi) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad(name, fmt::format("must be between {} and {}", lo, hi));
  return static_cast<float>(x);
}

const json* get_typed(const json& obj, const char* name, json::value_t type, std::string_view what) {
  const json* v = field(obj, name);
  if (v && v->type() != type) bad(name, what);
  return v;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_of(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(param, "must be a string or an array of text parts");
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object() || !part.contains("type") || part["type"] != "text")
      bad(p, "must be a text part ({\"type\": \"text\", \"text\": ...}); other part types are not supported");
    if (!part.contains("text") || !part["text"].is_string()) bad(p + ".text", "must be a string");
    if (!out.empty()) out += "\n";
    out += part["text"].get<std::string>();
  }
  return out;
}

// An assistant message's tool_calls, with each function's arguments turned into an object
// for the template (OpenAI sends them as JSON text).
std::string tool_calls_of(const json& v, const std::string& param) {
  if (!v.is_array()) bad(param, "must be an array");
  json calls = json::array();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) bad(p + ".function", "must be an object");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) bad(p + ".function.name", "must be a string");
    json args = json::object();
    if (f.contains("arguments")) {
      if (!f["arguments"].is_string()) bad(p + ".function.arguments", "must be a string of JSON");
      args = json::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (args.is_discarded()) bad(p + ".function.arguments", "is not valid JSON");
    }
    calls.push_back({{"id", c.value("id", "")}, {"type", "function"},
                     {"function", {{"name", f["name"]}, {"arguments", std::move(args)}}}});
  }
  return calls.dump();
}

std::vector<tokenizer::ChatMessage> messages_of(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw ApiError(400, "'messages' is required", "messages", "missing_field");
  if (!v->is_array() || v->empty()) bad("messages", "must be a non-empty array");
  std::vector<tokenizer::ChatMessage> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const std::string p = fmt::format("messages[{}]", i);
    const json& m = (*v)[i];
    if (!m.is_object()) bad(p, "must be an object");
    const json* role = field(m, "role");
    static constexpr std::string_view roles[] = {"system", "developer", "user", "assistant", "tool"};
    if (!role || !role->is_string() ||
        std::find(std::begin(roles), std::end(roles), role->get<std::string>()) == std::end(roles))
      bad(p + ".role", "must be one of system, developer, user, assistant, tool");
    tokenizer::ChatMessage msg{.role = role->get<std::string>(), .content = {}};
    const json* calls = field(m, "tool_calls");
    if (calls && msg.role == "assistant") msg.tool_calls_json = tool_calls_of(*calls, p + ".tool_calls");
    if (const json* c = field(m, "content")) msg.content = content_of(*c, p + ".content");
    else if (msg.tool_calls_json.empty()) bad(p + ".content", "is required");
    if (msg.role == "tool") {
      const json* id = field(m, "tool_call_id");
      if (id && !id->is_string()) bad(p + ".tool_call_id", "must be a string");
      if (id) msg.tool_call_id = id->get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void read_tools(const json& body, CompletionRequest& r) {
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "must be an array");
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object() || t.value("type", "") != "function") bad(p + ".type", "must be \"function\"");
      if (!t.contains("function") || !t["function"].is_object()) bad(p + ".function", "must be an object");
      const json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string()) bad(p + ".function.name", "must be a string");
      if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
        bad(p + ".function.parameters", "must be an object");
    }
    if (!tools->empty()) r.tools_json = tools->dump();
  }
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      const auto s = c->get<std::string>();
      if (s == "none") r.tool_choice = ToolChoice::None;
      else if (s == "auto") r.tool_choice = ToolChoice::Auto;
      else if (s == "required") r.tool_choice = ToolChoice::Required;
      else bad("tool_choice", "must be \"none\", \"auto\", \"required\" or a function");
    } else if (c->is_object() && c->value("type", "") == "function") {
      r.tool_choice = ToolChoice::Required;
    } else {
      bad("tool_choice", "must be \"none\", \"auto\", \"required\" or a function");
    }
  }
  if (r.tool_choice == ToolChoice::None) r.tools_json.clear();
}

std::vector<std::string> stops_of(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array() || v->size() > 16) bad("stop", "must be a string or an array of at most 16 strings");
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string() || s.get<std::string>().empty()) bad("stop", "must hold non-empty strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

void read_prompt(const json& body, CompletionRequest& r) {
  const json* v = field(body, "prompt");
  if (!v) throw ApiError(400, "'prompt' is required", "prompt", "missing_field");
  if (v->is_string()) {
    r.prompt = v->get<std::string>();
  } else if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) {
    r.prompt = (*v)[0].get<std::string>();
  } else if (v->is_array() && !v->empty() && (*v)[0].is_number()) {
    for (const auto& t : *v) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
        bad("prompt", "token ids must be non-negative integers");
      r.prompt_tokens.push_back(static_cast<tokenizer::TokenId>(t.get<std::int64_t>()));
    }
  } else {
    bad("prompt", "must be a string, one string in an array, or an array of token ids");
  }
  if (r.prompt.empty() && r.prompt_tokens.empty()) bad("prompt", "must not be empty");
}

void read_response_format(const json& body, CompletionRequest& r) {
  const json* v = get_typed(body, "response_format", json::value_t::object, "must be an object");
  if (!v) return;
  const json* type = field(*v, "type");
  if (!type || !type->is_string()) bad("response_format.type", "must be a string");
  const auto t = type->get<std::string>();
  if (t == "text") r.response_format = ResponseFormat::Text;
  else if (t == "json_object") r.response_format = ResponseFormat::JsonObject;
  else if (t == "json_schema") r.response_format = ResponseFormat::JsonSchema;
  else bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  if (r.response_format == ResponseFormat::JsonSchema) {
    const json* js = field(*v, "json_schema");
    if (!js || !js->is_object()) bad("response_format.json_schema", "must be an object with a \"schema\"");
    const json* schema = field(*js, "schema");
    if (!schema || !schema->is_object()) bad("response_format.json_schema.schema", "must be a JSON Schema object");
  }
}

}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_)
    : std::runtime_error(std::move(message)),
      status(status_),
      type(type_of_status(status_)),
      param(std::move(param_)),
      code(std::move(code_)) {}

json parse_body(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON", {}, "invalid_json");
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", {}, "invalid_json");
  return j;
}

CompletionRequest parse_request(Endpoint endpoint, const json& body) {
  CompletionRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(body, "model"); m && !m->is_string()) bad("model", "must be a string");
  if (endpoint == Endpoint::Chat) {
    r.messages = messages_of(body);
    read_tools(body, r);
  } else {
    read_prompt(body, r);
  }
  constexpr std::int64_t max_int32 = std::numeric_limits<std::int32_t>::max();
  if (auto v = get_int(body, "max_tokens", 1, max_int32)) r.max_tokens = *v;
  if (auto v = get_int(body, "max_completion_tokens", 1, max_int32)) r.max_tokens = *v;
  if (auto v = get_number(body, "temperature", 0, 100)) r.sampling.temperature = *v;
  if (auto v = get_number(body, "top_p", 0, 1)) {
    if (*v <= 0) bad("top_p", "must be above 0");
    r.sampling.top_p = *v;
  }
  if (auto v = get_int(body, "top_k", 0, max_int32)) r.sampling.top_k = static_cast<std::int32_t>(*v);
  if (auto v = get_number(body, "min_p", 0, 1)) r.sampling.min_p = *v;
  if (auto v = get_number(body, "presence_penalty", -2, 2)) r.sampling.presence_penalty = *v;
  if (auto v = get_number(body, "frequency_penalty", -2, 2)) r.sampling.frequency_penalty = *v;
  if (auto v = get_int(body, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()))
    r.seed = static_cast<std::uint64_t>(*v);
  r.stops = stops_of(body);
  if (auto v = get_int(body, "n", 1, 16)) r.n = static_cast<int>(*v);
  if (auto v = get_bool(body, "stream")) r.stream = *v;
  if (const json* so = get_typed(body, "stream_options", json::value_t::object, "must be an object")) {
    if (auto v = get_bool(*so, "include_usage")) r.include_usage = *v;
  }
  if (endpoint == Endpoint::Chat) {
    if (auto v = get_bool(body, "logprobs")) r.logprobs = *v;
    if (auto v = get_int(body, "top_logprobs", 0, 20)) {
      if (!r.logprobs) bad("top_logprobs", "needs 'logprobs': true");
      r.top_logprobs = static_cast<int>(*v);
    }
  } else if (auto v = get_int(body, "logprobs", 0, 5)) {  // the legacy field: how many alternatives
    r.logprobs = true;
    r.top_logprobs = static_cast<int>(*v);
  }
  if (auto v = get_bool(body, "ignore_eos")) r.ignore_eos = *v;
  read_response_format(body, r);
  return r;
}

namespace {

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (const unsigned char c : s) b.push_back(c);
  return b;
}

// Chat's {"content": [{token, logprob, bytes, top_logprobs}]}.
json chat_logprobs(std::span<const TokenLogprob> lps) {
  json content = json::array();
  for (const auto& lp : lps) {
    json top = json::array();
    for (const auto& [piece, p] : lp.top) top.push_back({{"token", piece}, {"logprob", p}, {"bytes", bytes_of(piece)}});
    content.push_back({{"token", lp.piece}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.piece)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// The legacy completions shape: parallel arrays.
json completion_logprobs(std::span<const TokenLogprob> lps) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  std::size_t offset = 0;
  for (const auto& lp : lps) {
    tokens.push_back(lp.piece);
    token_logprobs.push_back(lp.logprob);
    json alts = json::object();
    for (const auto& [piece, p] : lp.top) alts[piece] = p;
    top.push_back(alts);
    offsets.push_back(offset);
    offset += lp.piece.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json logprobs_json(const ResponseMeta& meta, std::span<const TokenLogprob> lps) {
  if (!meta.logprobs) return nullptr;
  return meta.endpoint == Endpoint::Chat ? chat_logprobs(lps) : completion_logprobs(lps);
}

json tool_calls_json(std::span<const ToolCall> calls, bool with_index) {
  json out = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

json finish_json(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }

json envelope(const ResponseMeta& meta, bool chunk) {
  const bool chat = meta.endpoint == Endpoint::Chat;
  return {{"id", meta.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", "fucina"}};
}

}  // namespace

json completion_json(const ResponseMeta& meta, std::span<const Choice> choices, const Usage& usage) {
  json out = envelope(meta, false);
  json list = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i}, {"logprobs", logprobs_json(meta, c.logprobs)}, {"finish_reason", finish_json(c.finish_reason)}};
    if (meta.endpoint == Endpoint::Chat) {
      json message = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        message["tool_calls"] = tool_calls_json(c.tool_calls, false);
      }
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.text;
    }
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return out;
}

json chunk_json(const ResponseMeta& meta, int index, const Choice& delta, bool first, bool with_usage_field) {
  json out = envelope(meta, true);
  json choice = {{"index", index},
                 {"logprobs", delta.logprobs.empty() ? json(nullptr) : logprobs_json(meta, delta.logprobs)},
                 {"finish_reason", finish_json(delta.finish_reason)}};
  if (meta.endpoint == Endpoint::Chat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.text.empty() || first) d["content"] = delta.text;
    if (!delta.tool_calls.empty()) d["tool_calls"] = tool_calls_json(delta.tool_calls, true);
    choice["delta"] = std::move(d);
  } else {
    choice["text"] = delta.text;
  }
  out["choices"] = json::array({std::move(choice)});
  if (with_usage_field) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  json out = envelope(meta, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

json error_json(const ApiError& e) {
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace fucina::serve
