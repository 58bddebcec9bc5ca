#pragma once
// Regex pre-tokenizer for byte-level BPE: splits text into the words BPE merges within.
//
// Note [Pre-tokenizer semantics]
// A pre-tokenizer is an ordered list of regexes. The first splits the whole text; each
// next one splits every piece the previous produced. Within a piece, every match becomes a
// piece and so does every non-empty gap between matches (llama.cpp's unicode_regex_split).
// A regex only sees its piece: lookaheads and `$` stop at the piece's end.
// Matching is PCRE2 (UTF + UCP, JIT) with two rewrites that reproduce llama.cpp's classes:
// `\s`/`\S` become llama's 25-code-point White_Space set (PCRE2 also counts U+180E), and
// `\p{Lu|Ll|Lt|Lm|Lo}` widen to `\p{L}` (llama.cpp collapses every letter to one class).
// Known deviation: PCRE2 10.42 has Unicode 14 tables, llama.cpp Unicode 15.1+, so letters
// and digits assigned after Unicode 14 (e.g. CJK Ext. H) are classified differently.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::tokenizer {

struct Piece {
  std::uint32_t begin;  // byte offset into the split text
  std::uint32_t end;
};

class PreTokenizer {
 public:
  // Compiles llama.cpp-syntax patterns (see Note). Throws InvalidArgument on a bad pattern.
  explicit PreTokenizer(std::span<const std::string> patterns);
  // The regex list llama.cpp uses for `tokenizer.ggml.pre` == `name` ("" = "default").
  // Throws Unsupported for a name it does not know.
  static PreTokenizer for_name(std::string_view name);
  // Whether `name` is known to for_name.
  static bool is_known(std::string_view name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` (strict UTF-8, see canonicalize_utf8) into pieces covering it in order.
  // Thread-safe: concurrent calls on one PreTokenizer are fine.
  void split(std::string_view text, std::vector<Piece>& out) const;
  std::vector<std::string> split_strings(std::string_view text) const;

  std::span<const std::string> patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace fucina::tokenizer
