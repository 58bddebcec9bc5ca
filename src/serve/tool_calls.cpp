#include "fucina/serve/tool_calls.hpp"

#include <nlohmann/json.hpp>

namespace fucina::serve {
namespace {

using nlohmann::json;

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// {"name": string, <args_key>: object} as a call; nullopt for anything else.
std::optional<ToolCall> call_of(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  for (const char* key : {"arguments", "parameters"})
    if (j.contains(key) && j[key].is_object()) return ToolCall{{}, j["name"].get<std::string>(), j[key].dump()};
  return std::nullopt;
}

std::optional<ParsedToolCalls> parse_hermes(std::string_view text) {
  constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  ParsedToolCalls out;
  std::string content;
  std::size_t pos = 0;
  while (true) {
    const auto b = text.find(open, pos);
    if (b == std::string_view::npos) break;
    const auto e = text.find(close, b + open.size());
    if (e == std::string_view::npos) return std::nullopt;  // cut off: not a finished call
    auto call = call_of(trim(text.substr(b + open.size(), e - b - open.size())));
    if (!call) return std::nullopt;
    content += text.substr(pos, b - pos);
    out.calls.push_back(std::move(*call));
    pos = e + close.size();
  }
  if (out.calls.empty()) return std::nullopt;
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

std::optional<ParsedToolCalls> parse_llama3(std::string_view text) {
  std::string_view body = trim(text);
  constexpr std::string_view python_tag = "<|python_tag|>";
  if (body.substr(0, python_tag.size()) == python_tag) body = trim(body.substr(python_tag.size()));
  auto call = call_of(body);
  if (!call) return std::nullopt;
  return ParsedToolCalls{{}, {std::move(*call)}};
}

}  // namespace

ToolCallFormat tool_call_format_of(std::string_view chat_template) {
  const bool hermes = chat_template.find("<tool_call>") != std::string_view::npos;
  const bool llama3 = chat_template.find("<|start_header_id|>") != std::string_view::npos;
  return llama3 && !hermes ? ToolCallFormat::Llama3 : ToolCallFormat::Hermes;
}

std::optional<ParsedToolCalls> parse_tool_calls(std::string_view text, ToolCallFormat format) {
  return format == ToolCallFormat::Llama3 ? parse_llama3(text) : parse_hermes(text);
}

}  // namespace fucina::serve
