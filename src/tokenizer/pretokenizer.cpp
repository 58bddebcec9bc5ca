#define PCRE2_CODE_UNIT_WIDTH 8
#include "fucina/tokenizer/pretokenizer.hpp"

#include <pcre2.h>

#include <algorithm>

#include "fucina/core/error.hpp"
#include "fucina/tokenizer/pretokenizer_spec.hpp"
#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {

namespace {

// llama.cpp's whitespace set (Unicode White_Space), as a PCRE2 class body.
constexpr std::string_view ws_class_body =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Rewrites a llama.cpp-syntax pattern for PCRE2 (Note [Pre-tokenizer semantics]).
std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  std::size_t class_start = 0;  // index just after '[' or '[^'
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        if (in_class) {
          out += ws_class_body;
        } else {
          out += '[';
          out += ws_class_body;
          out += ']';
        }
        ++i;
        continue;
      }
      if (e == 'S') {
        FUCINA_CHECK(!in_class, InvalidArgument, "[pretokenizer] \\S inside a class is unsupported: {}", p);
        out += "[^";
        out += ws_class_body;
        out += ']';
        ++i;
        continue;
      }
      if (e == 'd') {  // std::regex's \d is ASCII-only
        out += in_class ? "0-9" : "[0-9]";
        ++i;
        continue;
      }
      if (e == 'p' && i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i);
        if (close != std::string_view::npos) {
          const std::string_view prop = p.substr(i + 3, close - i - 3);
          if (prop == "Lu" || prop == "Ll" || prop == "Lt" || prop == "Lm" || prop == "Lo") {
            out += "\\p{L}";
            i = close;
            continue;
          }
        }
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out += '^';
        ++i;
      }
      class_start = i + 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) {
      in_class = false;
    }
    out += c;
  }
  return out;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(std::span<const std::string> patterns) : patterns_(patterns.begin(), patterns.end()) {
  for (const std::string& p : patterns_) {
    const std::string translated = translate_pattern(p);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &err,
                            &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail(ErrorCode::InvalidArgument, fmt::format("[pretokenizer] bad pattern at {}: {} ({})", err_off,
                                                   reinterpret_cast<const char*>(msg), p));
    }
    c->jit = pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE) == 0;
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::for_name(std::string_view name) {
  const PreTokenizerSpec* spec = find_pretokenizer_spec(name);
  FUCINA_CHECK(spec != nullptr, Unsupported, "[pretokenizer] unknown tokenizer.ggml.pre '{}'", name);
  std::vector<std::string> pats(spec->patterns.begin(), spec->patterns.end());
  return PreTokenizer(pats);
}

bool PreTokenizer::is_known(std::string_view name) { return find_pretokenizer_spec(name) != nullptr; }

namespace {

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    FUCINA_CHECK(md != nullptr, Internal, "[pretokenizer] out of memory");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

inline std::size_t char_len(unsigned char lead) { return utf8_seq_len(lead); }

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  out.clear();
  if (text.empty()) return;
  FUCINA_CHECK(text.size() < (std::size_t{1} << 32), InvalidArgument, "[pretokenizer] text too large ({} bytes)",
               text.size());
  out.push_back({0, static_cast<std::uint32_t>(text.size())});
  std::vector<Piece> next;
  const auto* subject_base = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (const auto& c : compiled_) {
    MatchData md(c->code);
    next.clear();
    next.reserve(out.size() * 2);
    for (const Piece piece : out) {
      const PCRE2_SPTR subject = subject_base + piece.begin;
      const PCRE2_SIZE len = piece.end - piece.begin;
      PCRE2_SIZE pos = 0;
      PCRE2_SIZE prev_end = 0;
      while (pos <= len) {
        int rc = c->jit ? pcre2_jit_match(c->code, subject, len, pos, 0, md.md, nullptr)
                        : pcre2_match(c->code, subject, len, pos, PCRE2_NO_UTF_CHECK, md.md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
          rc = pcre2_match(c->code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        FUCINA_CHECK(rc >= 0, Internal, "[pretokenizer] pcre2 match error {}", rc);
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.md);
        const PCRE2_SIZE ms = ov[0];
        const PCRE2_SIZE me = ov[1];
        if (ms > prev_end)
          next.push_back({piece.begin + static_cast<std::uint32_t>(prev_end), piece.begin + static_cast<std::uint32_t>(ms)});
        if (me > ms) {
          next.push_back({piece.begin + static_cast<std::uint32_t>(ms), piece.begin + static_cast<std::uint32_t>(me)});
          prev_end = me;
          pos = me;
        } else {
          // Empty match: step over one character, it stays part of the next gap.
          prev_end = ms;
          if (ms >= len) break;
          pos = ms + char_len(subject[ms]);
        }
      }
      if (prev_end < len)
        next.push_back({piece.begin + static_cast<std::uint32_t>(prev_end), piece.end});
    }
    out.swap(next);
  }
}

std::vector<std::string> PreTokenizer::split_strings(std::string_view text) const {
  std::vector<Piece> pieces;
  split(text, pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const Piece& p : pieces) out.emplace_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

}  // namespace fucina::tokenizer
