#pragma once
// A conversation as a prompt: the model's chat template (ChatML when the GGUF has none)
// rendered with its BOS/EOS texts, cut where the tokenizer adds them itself
// (Note [llama.cpp chat rendering] in tokenizer/chat_template.hpp).
#include <span>
#include <string>
#include <string_view>

#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/chat_template.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::generate {

std::string render_chat(const gguf::Reader& file, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt);

// Same with the template source given (a --chat-template-file) and the tools it may list (a
// JSON array of OpenAI tools; empty: none).
std::string render_chat(std::string_view tmpl, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt,
                        std::string tools_json = {});

// The template render_chat(file, ...) uses: the GGUF's, else ChatML.
std::string chat_template_or_default(const gguf::Reader& file);

}  // namespace fucina::generate
