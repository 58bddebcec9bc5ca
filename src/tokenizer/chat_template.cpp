// Chat rendering with llama.cpp's message adjustments (Note [llama.cpp chat rendering]).
#include "fucina/tokenizer/chat_template.hpp"

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

Value message_value(const ChatMessage& m) { return Value(Object{{"role", Value(m.role)}, {"content", Value(m.content)}}); }

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
