#pragma once
// Chat templates: render a conversation into a prompt with the model's Jinja template,
// byte-exact with llama.cpp's jinja path (common_chat_templates_apply, `llama-cli --jinja`).
//
// Note [llama.cpp chat rendering]
// llama.cpp does more than run the template, and so do we:
//  - the template sees `messages` (dicts with `role` and `content`), `bos_token`,
//    `eos_token`, `enable_thinking` = true, `datetime`/`date_string` (today), and
//    `add_generation_prompt` = true only when requested (undefined otherwise);
//  - role "developer" becomes "system" (unless the template mentions "<|channel|>");
//  - a template "does not support a system role" when rendering [system, user] never reads
//    the system message's content (Phi-3's does not); the system message is then merged into
//    the next message as "<system>\n<content>" (or dropped when it is the only message);
//  - `tools` and a message's `tool_calls` / `tool_call_id` are given only when set (JSON
//    turned into template values), so templates that test `if tools` see none otherwise;
//  - a model without a template gets ChatML (default_chat_template());
//  - when the tokenizer adds BOS/EOS itself, a leading bos_token / trailing eos_token is cut
//    from the render so it is not doubled (ChatTemplateOptions::strip_bos/strip_eos).
// Goldens: tests/data/chat (scripts/parity/make_chat_goldens.sh).
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fucina::gguf {
class Reader;
}

namespace fucina::tokenizer {

struct ChatMessage {
  std::string role, content;
  // An assistant turn's tool calls: a JSON array of OpenAI tool_calls objects, each
  // function's arguments a JSON object (as llama.cpp hands them to templates); empty: none.
  std::string tool_calls_json{};
  std::string tool_call_id{};  // a "tool" message: the call it answers; empty: none
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // token texts, e.g. "<s>" / "<|im_end|>"
  // The tokenizer adds BOS (EOS) itself: cut a leading bos_token (trailing eos_token).
  bool strip_bos = false;
  bool strip_eos = false;
  // The `tools` the template may list: a JSON array of OpenAI tool objects; empty: undefined.
  std::string tools_json{};
};

// Renders `messages` with template source `tmpl` (Note [llama.cpp chat rendering]).
// Errors: InvalidArgument (malformed template with line:col, runtime type errors,
// raise_exception(msg) with msg) or Unsupported (construct outside Note [Jinja subset]).
std::string apply_chat_template(std::string_view tmpl, std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& options);
// Same, with nothing stripped (the raw render llama.cpp computes before its BOS/EOS cut).
std::string apply_chat_template(std::string_view tmpl, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, std::string_view bos_token,
                                std::string_view eos_token);

// The GGUF's tokenizer.chat_template (or tokenizer.chat_template.<name>), or nullopt.
std::optional<std::string> chat_template_of(const gguf::Reader& file, std::string_view name = {});

// The template llama.cpp uses for a model without one: ChatML,
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n".
std::string_view default_chat_template();

}  // namespace fucina::tokenizer
