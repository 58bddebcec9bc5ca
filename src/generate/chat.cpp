#include "fucina/generate/chat.hpp"

#include <utility>

namespace fucina::generate {

std::string render_chat(std::string_view tmpl, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt,
                        std::string tools_json) {
  const auto text = [&](tokenizer::TokenId id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  const tokenizer::ChatTemplateOptions opt{.add_generation_prompt = add_generation_prompt,
                                           .bos_token = text(tok.bos_id()),
                                           .eos_token = text(tok.eos_id()),
                                           .strip_bos = tok.add_bos(),
                                           .strip_eos = tok.add_eos(),
                                           .tools_json = std::move(tools_json)};
  return tokenizer::apply_chat_template(tmpl, messages, opt);
}

std::string chat_template_or_default(const gguf::Reader& file) {
  const auto tmpl = tokenizer::chat_template_of(file);
  return tmpl ? *tmpl : std::string(tokenizer::default_chat_template());
}

std::string render_chat(const gguf::Reader& file, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt) {
  return render_chat(chat_template_or_default(file), tok, messages, add_generation_prompt);
}

}  // namespace fucina::generate
