#pragma once
// Tool calls read back from generated text, in the syntax the model's chat template teaches:
//   Hermes / Qwen3:  <tool_call>{"name": "f", "arguments": {...}}</tool_call>  (one or more,
//                    text around them is the message content)
//   Llama 3.x:       {"name": "f", "parameters": {...}}  (the whole reply, optionally after
//                    <|python_tag|>; "arguments" is accepted too)
// Text that is not such a call (or a call whose JSON does not parse) stays plain content:
// the model answered in words.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::serve {

struct ToolCall {
  std::string id;         // "call_..." (given by the caller of parse_tool_calls)
  std::string name;
  std::string arguments;  // a JSON object as text, as OpenAI sends it
};

enum class ToolCallFormat { Hermes, Llama3 };

// Llama3 when the template speaks Llama 3's header syntax without <tool_call>; Hermes otherwise.
ToolCallFormat tool_call_format_of(std::string_view chat_template);

struct ParsedToolCalls {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ToolCall> calls;  // ids left empty
};
// nullopt when `text` holds no well-formed call.
std::optional<ParsedToolCalls> parse_tool_calls(std::string_view text, ToolCallFormat format);

}  // namespace fucina::serve
