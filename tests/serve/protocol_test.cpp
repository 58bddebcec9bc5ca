// The server's wire format without HTTP: request checking (Note [OpenAI request checking]),
// response shapes, tool-call parsing, and tools reaching the chat template.
#include <gtest/gtest.h>

#include <string>

#include "fucina/serve/protocol.hpp"
#include "fucina/serve/tool_calls.hpp"
#include "fucina/tokenizer/chat_template.hpp"

namespace fucina::serve {
namespace {

const char* k_user = R"("messages": [{"role": "user", "content": "hi"}])";

CompletionRequest chat(const std::string& fields) {
  return parse_request(Endpoint::Chat, parse_body("{" + std::string(k_user) + (fields.empty() ? "" : ", ") + fields + "}"));
}

// The ApiError a body gets: its status and param.
std::pair<int, std::string> refusal(Endpoint e, const std::string& body) {
  try {
    parse_request(e, parse_body(body));
  } catch (const ApiError& err) {
    return {err.status, err.param};
  }
  return {200, ""};
}

TEST(ServeProtocol, ReadsTheFields) {
  const auto r = chat(R"("max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3, "min_p": 0.1, "seed": 42,
                         "stop": ["a", "b"], "n": 2, "stream": true, "stream_options": {"include_usage": true},
                         "logprobs": true, "top_logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": -0.5,
                         "unknown_field": {"ignored": true}, "user": null)");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.stops, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(chat(R"("max_completion_tokens": 9)").max_tokens, 9);
  EXPECT_EQ(chat(R"("stop": "x")").stops, std::vector<std::string>{"x"});
}

TEST(ServeProtocol, ContentPartsAndToolMessages) {
  const auto r = parse_request(Endpoint::Chat, parse_body(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}]})"));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].content, "a\nb");
  EXPECT_EQ(json::parse(r.messages[1].tool_calls_json)[0]["function"]["arguments"]["x"], 1);  // an object now
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
}

TEST(ServeProtocol, WrongFieldsNameThemselves) {
  const std::string u = std::string("{") + k_user + ", ";
  const std::pair<std::string, std::string> cases[] = {
      {u + R"("temperature": "hot"})", "temperature"},
      {u + R"("temperature": -1})", "temperature"},
      {u + R"("max_tokens": 1.5})", "max_tokens"},
      {u + R"("max_tokens": 0})", "max_tokens"},
      {u + R"("max_tokens": 99999999999999999999999})", "max_tokens"},
      {u + R"("max_tokens": 18446744073709551615})", "max_tokens"},
      {u + R"("top_p": 0})", "top_p"},
      {u + R"("n": 100})", "n"},
      {u + R"("stream": "yes"})", "stream"},
      {u + R"("stop": [1]})", "stop"},
      {u + R"("stop": {"a": 1}})", "stop"},
      {u + R"("seed": "x"})", "seed"},
      {u + R"("top_logprobs": 2})", "top_logprobs"},
      {u + R"("tools": [{"type": "function"}]})", "tools[0].function"},
      {u + R"("tool_choice": 3})", "tool_choice"},
      {u + R"("response_format": {"type": "yaml"}})", "response_format.type"},
      {u + R"("model": 5})", "model"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0]"},
      {R"({})", "messages"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body);
    EXPECT_EQ(refusal(Endpoint::Chat, body), std::make_pair(400, param));
  }
  EXPECT_EQ(refusal(Endpoint::Completion, R"({"prompt": 3})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(refusal(Endpoint::Completion, R"({"prompt": "x", "logprobs": 6})"), std::make_pair(400, std::string("logprobs")));
  EXPECT_EQ(refusal(Endpoint::Completion, R"({"prompt": [1, -2]})"), std::make_pair(400, std::string("prompt")));
}

TEST(ServeProtocol, BadBodiesAre400) {
  for (const std::string body : {"", "{", "[1]", "\"x\"", "{\"a\": 1e999}", "{\"messages\": \"\xff\xfe\"}", "nul"}) {
    SCOPED_TRACE(body);
    EXPECT_THROW(
        {
          try {
            parse_body(body);
          } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
            throw;
          }
        },
        ApiError);
  }
}

TEST(ServeProtocol, ResponseShapes) {
  const ResponseMeta meta{.endpoint = Endpoint::Chat, .id = "chatcmpl-1", .model = "m", .created = 5, .logprobs = false};
  const Choice c{.text = "hi", .tool_calls = {}, .finish_reason = "stop", .logprobs = {}};
  const json j = completion_json(meta, std::span(&c, 1), {.prompt_tokens = 3, .completion_tokens = 2});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", "hi"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
  const Choice call{.text = "", .tool_calls = {{"call_1", "f", R"({"x":1})"}}, .finish_reason = "tool_calls", .logprobs = {}};
  const json t = completion_json(meta, std::span(&call, 1), {});
  EXPECT_TRUE(t["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(t["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  const json first = chunk_json(meta, 0, {}, true, false);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_FALSE(first.contains("usage"));
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(dump(json("a\xff")), "\"a\xef\xbf\xbd\"");  // a cut character is replaced, never a throw
  const json e = error_json(ApiError(400, "bad", "temperature", "invalid_value"));
  EXPECT_EQ(e, json({{"error", {{"message", "bad"}, {"type", "invalid_request_error"}, {"param", "temperature"}, {"code", "invalid_value"}}}}));
}

TEST(ServeToolCalls, Hermes) {
  const auto p = parse_tool_calls("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n"
                                  "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                                  ToolCallFormat::Hermes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->content, "Let me look.");
  ASSERT_EQ(p->calls.size(), 2u);
  EXPECT_EQ(p->calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p->calls[0].arguments), json({{"city", "Rome"}}));
  EXPECT_EQ(p->calls[1].arguments, "{}");
  EXPECT_FALSE(parse_tool_calls("just words", ToolCallFormat::Hermes));
  EXPECT_FALSE(parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {", ToolCallFormat::Hermes));  // cut off
  EXPECT_FALSE(parse_tool_calls("<tool_call>not json</tool_call>", ToolCallFormat::Hermes));
}

TEST(ServeToolCalls, Llama3) {
  const auto p = parse_tool_calls(" <|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}} ", ToolCallFormat::Llama3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->content, "");
  ASSERT_EQ(p->calls.size(), 1u);
  EXPECT_EQ(json::parse(p->calls[0].arguments), json({{"city", "Rome"}}));
  EXPECT_FALSE(parse_tool_calls("{\"temperature\": 3}", ToolCallFormat::Llama3));
  EXPECT_FALSE(parse_tool_calls("The answer is {\"name\": \"x\"}", ToolCallFormat::Llama3));
}

TEST(ServeToolCalls, FormatFollowsTheTemplate) {
  EXPECT_EQ(tool_call_format_of("{{- '<tool_call>' }}"), ToolCallFormat::Hermes);
  EXPECT_EQ(tool_call_format_of("<|start_header_id|>ipython<|end_header_id|>"), ToolCallFormat::Llama3);
  EXPECT_EQ(tool_call_format_of("<|im_start|>"), ToolCallFormat::Hermes);
}

// Tools and a turn's tool calls reach the template as values (a Qwen3-style excerpt).
TEST(ServeChatTemplate, ToolsAndToolCallsAreRendered) {
  const std::string tmpl =
      "{%- if tools %}{% for t in tools %}[{{ t.function.name }}:{{ t.function.parameters | tojson }}]{% endfor %}{% endif %}"
      "{%- for m in messages %}<{{ m.role }}>{{ m.content }}"
      "{%- if m.tool_calls %}{% for c in m.tool_calls %}{call {{ c.function.name }} {{ c.function.arguments | tojson }}}{% endfor %}{% endif %}"
      "{%- if m.tool_call_id %}(for {{ m.tool_call_id }}){% endif %}{% endfor %}";
  std::vector<tokenizer::ChatMessage> msgs{{.role = "user", .content = "w?"},
                                           {.role = "assistant", .content = "",
                                            .tool_calls_json = R"([{"id":"c1","type":"function","function":{"name":"get","arguments":{"city":"Rome"}}}])"},
                                           {.role = "tool", .content = "sunny", .tool_call_id = "c1"}};
  tokenizer::ChatTemplateOptions opt;
  opt.add_generation_prompt = false;
  EXPECT_EQ(tokenizer::apply_chat_template(tmpl, msgs, opt), R"(<user>w?<assistant>{call get {"city": "Rome"}}<tool>sunny(for c1))");
  opt.tools_json = R"([{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}])";
  EXPECT_EQ(tokenizer::apply_chat_template(tmpl, msgs, opt).substr(0, 26), R"([get:{"type": "object"}]<u)");
}

}  // namespace
}  // namespace fucina::serve
