// libFuzzer target for the chat template engine (Jinja subset): any template and any
// messages must render or throw fucina::Error, never crash, hang or exhaust memory.
// Input: byte 0 holds the options (bit 0 add_generation_prompt, bit 1 strip_bos, bit 2
// strip_eos), then NUL-separated fields: template, bos text, eos text, then role, content
// pairs (a missing field is empty).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/tokenizer/chat_template.hpp"

namespace tk = fucina::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned flags = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto next = [&rest]() {
    const std::size_t e = rest.find('\0');
    const std::string_view field = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 1);
    return field;
  };
  const std::string_view tmpl = next();
  tk::ChatTemplateOptions opt;
  opt.bos_token = next();
  opt.eos_token = next();
  opt.add_generation_prompt = (flags & 1) != 0;
  opt.strip_bos = (flags & 2) != 0;
  opt.strip_eos = (flags & 4) != 0;
  std::vector<tk::ChatMessage> messages;
  while (!rest.empty() && messages.size() < 64) {
    tk::ChatMessage m;
    m.role = next();
    m.content = next();
    messages.push_back(std::move(m));
  }
  try {
    (void)tk::apply_chat_template(tmpl, messages, opt);
  } catch (const fucina::Error&) {
  }
  return 0;
}
