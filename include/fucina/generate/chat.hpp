#pragma once
// A conversation as a prompt: the model's chat template (ChatML when the GGUF has none)
// rendered with its BOS/EOS texts, cut where the tokenizer adds them itself
// (Note [llama.cpp chat rendering] in tokenizer/chat_template.hpp).
#include <span>
#include <string>

#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/chat_template.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::generate {

std::string render_chat(const gguf::Reader& file, const tokenizer::Tokenizer& tok,
                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt);

}  // namespace fucina::generate
