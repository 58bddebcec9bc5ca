// Chat rendering with llama.cpp's message adjustments (Note [llama.cpp chat rendering]).
#include "fucina/tokenizer/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <ctime>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/jinja.hpp"

namespace fucina::tokenizer {
namespace {

using jinja::Array;
using jinja::Object;
using jinja::Value;

Value json_value(const nlohmann::json& j) {
  if (j.is_array()) {
    Array a(j.size());
    for (std::size_t i = 0; i < j.size(); ++i) a[i] = json_value(j[i]);
    return Value(std::move(a));
  }
  if (j.is_object()) {
    Object o;
    for (const auto& [k, v] : j.items()) o.emplace_back(k, json_value(v));
    return Value(std::move(o));
  }
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer() && !j.is_number_unsigned()) return Value(j.get<std::int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  return Value(jinja::None{});  // null
}

Value json_text_value(const std::string& text, std::string_view what) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  FUCINA_CHECK(!j.is_discarded(), InvalidArgument, "[chat] {} is not valid JSON", what);
  return json_value(j);
}

Value message_value(const ChatMessage& m) {
  Object o(2 + !m.tool_calls_json.empty() + !m.tool_call_id.empty());
  o[0] = {"role", Value(m.role)};
  o[1] = {"content", Value(m.content)};
  std::size_t i = 2;
  if (!m.tool_calls_json.empty()) o[i++] = {"tool_calls", json_text_value(m.tool_calls_json, "tool_calls")};
  if (!m.tool_call_id.empty()) o[i++] = {"tool_call_id", Value(m.tool_call_id)};
  return Value(std::move(o));
}

std::string today(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

// llama.cpp's probe: render [system, user] and see whether the system content is ever read.
bool supports_system_role(const jinja::Template& t) {
  const Value system = message_value({"system", "System message"});
  const Object globals{{"messages", Value(Array{system, message_value({"user", "User message"})})},
                       {"tools", Value(Array{})},
                       {"bos_token", Value("")},
                       {"eos_token", Value("")},
                       {"add_generation_prompt", Value(true)}};
  jinja::AccessProbe probe{system.identity(), "content", false};
  try {
    t.render(globals, &probe);
  } catch (const Error&) {  // like llama.cpp, a failing probe only counts what it read
  }
  return probe.hit;
}

}  // namespace

std::string apply_chat_template(std::string_view tmpl, std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& options) {
  const jinja::Template t = jinja::Template::parse(tmpl);
  std::vector<ChatMessage> msgs(messages.begin(), messages.end());
  if (tmpl.find("<|channel|>") == std::string_view::npos)
    for (auto& m : msgs)
      if (m.role == "developer") m.role = "system";
  if (!msgs.empty() && msgs.front().role == "system" && !supports_system_role(t)) {
    if (msgs.size() > 1) msgs[1].content = msgs[0].content + "\n" + msgs[1].content;
    msgs.erase(msgs.begin());
  }
  Array list;
  for (const auto& m : msgs) list.push_back(message_value(m));
  Object globals{{"messages", Value(std::move(list))},
                 {"bos_token", Value(options.bos_token)},
                 {"eos_token", Value(options.eos_token)},
                 {"enable_thinking", Value(true)},
                 {"datetime", Value(today("%b %d %Y"))},
                 {"date_string", Value(today("%d %b %Y"))}};
  if (options.add_generation_prompt) globals.emplace_back("add_generation_prompt", Value(true));
  if (!options.tools_json.empty()) globals.emplace_back("tools", json_text_value(options.tools_json, "tools"));
  std::string out = t.render(globals);
  const std::string& bos = options.bos_token;
  const std::string& eos = options.eos_token;
  if (options.strip_bos && out.compare(0, bos.size(), bos) == 0) out.erase(0, bos.size());
  if (options.strip_eos && out.size() >= eos.size() && out.compare(out.size() - eos.size(), eos.size(), eos) == 0)
    out.erase(out.size() - eos.size());
  return out;
}

std::string apply_chat_template(std::string_view tmpl, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, std::string_view bos_token,
                                std::string_view eos_token) {
  ChatTemplateOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = bos_token;
  o.eos_token = eos_token;
  return apply_chat_template(tmpl, messages, o);
}

std::optional<std::string> chat_template_of(const gguf::Reader& file, std::string_view name) {
  const std::string key = name.empty() ? std::string("tokenizer.chat_template")
                                       : "tokenizer.chat_template." + std::string(name);
  if (!file.contains(key)) return std::nullopt;
  return std::string(file.get_string(key));
}

std::string_view default_chat_template() {
  return "{%- for message in messages -%}\n"
         "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ message['content'] ~ '<|im_end|>\\n' -}}\n"
         "{%- endfor -%}\n"
         "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
}

}  // namespace fucina::tokenizer
