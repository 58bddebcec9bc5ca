#pragma once
// The OpenAI wire format of `fucina serve`: request bodies checked into plain structs, and
// the response objects (completion, stream chunk, usage, error) built from what was
// generated. No HTTP here (server.hpp) and no model (the tokens come from the caller).
//
// Note [OpenAI request checking]
// Unknown fields are ignored and a null counts as absent (clients send both). A known field
// of the wrong type or out of range is an ApiError 400 whose `param` names it (with its
// path, e.g. "messages[2].content"). Numbers are JSON numbers: a non-integer, or an integer
// beyond the field's range, is refused rather than clamped. Sampling defaults are
// `fucina run`'s (sample::SamplerConfig), not OpenAI's temperature 1.
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fucina/sample/sampler.hpp"
#include "fucina/serve/tool_calls.hpp"
#include "fucina/tokenizer/chat_template.hpp"
#include "fucina/tokenizer/tokenizer_data.hpp"

namespace fucina::serve {

using nlohmann::json;

// An error answered as {"error": {"message", "type", "param", "code"}} with HTTP `status`.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});
  int status;
  std::string type;   // OpenAI's: invalid_request_error, authentication_error, ...
  std::string param;  // the request field at fault; empty: none
  std::string code;   // a machine-readable reason; empty: none
};

enum class Endpoint { Chat, Completion };  // /v1/chat/completions, /v1/completions

enum class ResponseFormat { Text, JsonObject, JsonSchema };
enum class ToolChoice { None, Auto, Required };  // a named function counts as Required

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::vector<tokenizer::ChatMessage> messages;       // Chat
  std::string prompt;                                 // Completion, given as text
  std::vector<tokenizer::TokenId> prompt_tokens;      // Completion, given as token ids
  std::string tools_json;  // the tools as a JSON array; empty: none given
  ToolChoice tool_choice = ToolChoice::Auto;
  std::int64_t max_tokens = -1;  // -1: until end of generation or of the context
  sample::SamplerConfig sampling{};
  std::optional<std::uint64_t> seed;  // unset: a random one per request
  std::vector<std::string> stops;
  int n = 1;  // choices
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
  bool ignore_eos = false;  // llama-server's extension, for benchmarks
  ResponseFormat response_format = ResponseFormat::Text;
};

// The body as a JSON object; ApiError 400 for anything else (bad JSON, invalid UTF-8, a
// number out of double range, not an object).
json parse_body(std::string_view body);
// Checks `body` per Note [OpenAI request checking]; throws ApiError.
CompletionRequest parse_request(Endpoint endpoint, const json& body);

// One generated token's log-probability and its most likely alternatives.
struct TokenLogprob {
  std::string piece;  // the token's bytes (may be partial UTF-8)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

struct Choice {
  std::string text;                // content (the text outside tool calls)
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;       // "stop", "length" or "tool_calls"
  std::vector<TokenLogprob> logprobs;
};

struct Usage {
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
};

// What every object of one response shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::string model;
  std::int64_t created = 0;  // unix seconds
  bool logprobs = false;     // the request asked for them ("logprobs": null otherwise)
};

json completion_json(const ResponseMeta& meta, std::span<const Choice> choices, const Usage& usage);
// A stream chunk for choice `index`: `text` (and `tool_calls`, chat only) as its delta,
// `finish_reason` unset while the choice goes on. Chat's first chunk carries the role.
json chunk_json(const ResponseMeta& meta, int index, const Choice& delta, bool first, bool with_usage_field);
json usage_chunk_json(const ResponseMeta& meta, const Usage& usage);  // include_usage's last chunk
json error_json(const ApiError& e);

// JSON text; invalid UTF-8 in strings (a token cut mid-character) becomes U+FFFD.
std::string dump(const json& j);
std::string sse_event(const json& j);  // "data: {...}\n\n"

}  // namespace fucina::serve
