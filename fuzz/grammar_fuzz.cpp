// libFuzzer target for constrained output: GBNF text and JSON Schema text must parse or end
// in a fucina::Error (one line and exit 1 in the CLI), never crash or hang; a grammar that
// parses is then matched against the rest of the input, byte by byte, as a model's tokens
// would be fed. Input: a selector byte (even: GBNF, odd: JSON Schema), the grammar or schema
// text, a NUL, then the text to match.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "fucina/core/error.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/grammar/matcher.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t nul = all.find('\0');
  const std::string_view spec = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  namespace g = fucina::grammar;
  std::shared_ptr<const g::Grammar> grammar;
  try {
    grammar = std::make_shared<const g::Grammar>(data[0] % 2 == 0 ? g::parse_gbnf(spec) : g::from_json_schema_text(spec));
  } catch (const fucina::Error&) {
    return 0;
  }
  g::Matcher m(grammar);
  for (const char c : text)
    if (!m.accept(std::string_view(&c, 1))) break;
  (void)m.complete();
  return 0;
}
