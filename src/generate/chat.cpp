#include "fucina/generate/chat.hpp"

namespace fucina::generate {

std::string render_chat(const gguf::Reader& file, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt) {
  const auto tmpl = tokenizer::chat_template_of(file);
  const auto text = [&](tokenizer::TokenId id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  const tokenizer::ChatTemplateOptions opt{.add_generation_prompt = add_generation_prompt,
                                           .bos_token = text(tok.bos_id()),
                                           .eos_token = text(tok.eos_id()),
                                           .strip_bos = tok.add_bos(),
                                           .strip_eos = tok.add_eos()};
  return tokenizer::apply_chat_template(tmpl ? std::string_view(*tmpl) : tokenizer::default_chat_template(), messages, opt);
}

}  // namespace fucina::generate
