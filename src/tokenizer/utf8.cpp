#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {

namespace {
constexpr bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

std::uint32_t decode_utf8_lenient(std::string_view s, std::size_t& pos) {
  const std::size_t at = pos;  // `pos` advances before the result is assembled
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[at + i]); };
  const unsigned char c0 = b(0);
  const std::size_t left = s.size() - pos;
  if (!(c0 & 0x80)) {
    pos += 1;
    return c0;
  }
  if (!(c0 & 0x40)) {  // stray continuation byte
    pos += 1;
    return replacement_char;
  }
  if (!(c0 & 0x20)) {
    if (left < 2 || !is_cont(b(1))) {
      pos += 1;
      return replacement_char;
    }
    pos += 2;
    return ((c0 & 0x1Fu) << 6) | (b(1) & 0x3Fu);
  }
  if (!(c0 & 0x10)) {
    if (left < 3 || !is_cont(b(1)) || !is_cont(b(2))) {
      pos += 1;
      return replacement_char;
    }
    pos += 3;
    return ((c0 & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
  }
  if (!(c0 & 0x08)) {
    if (left < 4 || !is_cont(b(1)) || !is_cont(b(2)) || !is_cont(b(3))) {
      pos += 1;
      return replacement_char;
    }
    pos += 4;
    const std::uint32_t cpt =
        ((c0 & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    return cpt > 0x10FFFF ? replacement_char : cpt;
  }
  pos += 1;
  return replacement_char;
}

void append_utf8(std::string& out, std::uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cpt;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cpt = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cpt = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cpt = c & 0x07u;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if (!is_cont(d)) return false;
      cpt = (cpt << 6) | (d & 0x3Fu);
    }
    constexpr std::uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cpt < min_for_len[len] || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

bool canonicalize_utf8(std::string_view s, std::string& out) {
  if (is_valid_utf8(s)) return false;
  out.clear();
  out.reserve(s.size() + 16);
  std::size_t pos = 0;
  while (pos < s.size()) append_utf8(out, decode_utf8_lenient(s, pos));
  return true;
}

std::size_t utf8_complete_prefix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence is not finished yet.
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if (is_cont(c)) continue;
    if (c < 0xC0) return n;  // ASCII: everything before is complete
    const std::size_t need = utf8_seq_len(c);
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace fucina::tokenizer
