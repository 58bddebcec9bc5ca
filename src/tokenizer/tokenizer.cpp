#include "fucina/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <unordered_map>

#include "fucina/core/error.hpp"
#include "fucina/tokenizer/bpe_model.hpp"
#include "fucina/tokenizer/pretokenizer.hpp"
#include "fucina/tokenizer/pretokenizer_spec.hpp"
#include "fucina/tokenizer/spm_model.hpp"
#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {

namespace {

constexpr std::string_view spm_space = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::uint32_t attr_from_type(std::int32_t t) {
  switch (static_cast<TokenType>(t)) {
    case TokenType::Unknown: return attr_unknown;
    case TokenType::Unused: return attr_unused;
    case TokenType::Normal: return attr_normal;
    case TokenType::Control: return attr_control;
    case TokenType::UserDefined: return attr_user_defined;
    case TokenType::Byte: return attr_byte;
    default: return attr_undefined;
  }
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  std::size_t pos = 0;
  while (true) {
    const std::size_t m = s.find(from, pos);
    if (m == std::string::npos) break;
    out.append(s, pos, m - pos);
    out.append(to);
    pos = m + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// C-locale isspace (llama.cpp strips special-token neighbours with it).
bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Texts llama.cpp treats as end-of-generation, forcing them to CONTROL.
constexpr std::array<std::string_view, 22> eog_texts = {
    "<|eot_id|>",   "<|im_end|>",   "<|end|>",        "<|return|>",         "<|call|>",
    "<|flush|>",    "<|calls|>",    "<end_of_turn>",  "<|endoftext|>",      "</s>",
    "<|eom_id|>",   "<EOT>",        "_<EOT>",         "[EOT]",              "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",            "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["};
constexpr std::array<std::string_view, 11> eot_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "[EOT]",   "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
// FIM marker spellings (llama.cpp marks them CONTROL).
constexpr std::array<std::string_view, 34> fim_texts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

}  // namespace

struct Tokenizer::Impl {
  VocabKind kind = VocabKind::Spm;
  std::string pre;
  const PreTokenizerSpec* spec = nullptr;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<std::uint32_t> attrs;
  std::unordered_map<std::string_view, TokenId> token_to_id;
  std::vector<TokenId> special_tokens;  // partition order: longest text first
  std::vector<std::string> pieces;      // token_to_piece with special rendering
  std::vector<bool> eog;
  TokenId bos = null_token, eos = null_token, unk = null_token, pad = null_token, eot = null_token;
  bool add_bos = false, add_eos = false, add_space_prefix = false, clean_spaces = false;
  std::string chat_template;
  std::optional<PreTokenizer> pretok;
  std::optional<BpeModel> bpe;
  std::optional<SpmModel> spm;

  struct Fragment {
    TokenId token;  // null_token for raw text
    std::uint32_t begin, end;
  };
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& frags) const;
  void encode_bpe_text(std::string_view text, std::vector<TokenId>& out) const;
  std::string render_piece(TokenId id) const;
};

Tokenizer::Tokenizer(TokenizerData d) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const std::size_t n = d.tokens.size();
  FUCINA_CHECK(n > 0, InvalidFile, "[tokenizer] empty vocabulary");
  FUCINA_CHECK(n < (std::size_t{1} << 31), InvalidFile, "[tokenizer] vocabulary too large ({})", n);
  FUCINA_CHECK(d.scores.empty() || d.scores.size() >= n, InvalidFile, "[tokenizer] {} scores for {} tokens",
               d.scores.size(), n);
  FUCINA_CHECK(d.token_types.empty() || d.token_types.size() >= n, InvalidFile,
               "[tokenizer] {} token types for {} tokens", d.token_types.size(), n);

  TokenId def_bos = null_token, def_eos = null_token, def_unk = null_token;
  if (d.model == "llama") {
    m.kind = VocabKind::Spm;
    def_bos = 1;
    def_eos = 2;
    def_unk = 0;
    m.add_bos = true;
    m.add_space_prefix = true;
  } else if (d.model == "gpt2") {
    m.kind = VocabKind::Bpe;
    m.pre = d.pre.empty() ? "default" : d.pre;
    m.spec = find_pretokenizer_spec(m.pre);
    FUCINA_CHECK(m.spec != nullptr, Unsupported, "[tokenizer] unknown pre-tokenizer '{}'", m.pre);
    def_bos = m.spec->no_bos_token ? null_token : 11;
    def_eos = 11;
    m.add_bos = m.spec->add_bos;
    m.clean_spaces = m.spec->clean_spaces;
  } else {
    fail(ErrorCode::Unsupported, fmt::format("[tokenizer] unsupported tokenizer model '{}'", d.model));
  }
  if (d.add_space_prefix) m.add_space_prefix = *d.add_space_prefix;

  m.tokens = std::move(d.tokens);
  m.scores = std::move(d.scores);
  m.scores.resize(n, 0.0f);
  m.attrs.assign(n, attr_normal);
  for (std::size_t i = 0; i < n; ++i) {
    if (m.tokens[i].empty()) m.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    if (!d.token_types.empty()) m.attrs[i] = attr_from_type(d.token_types[i]);
  }
  m.token_to_id.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) m.token_to_id.insert_or_assign(std::string_view(m.tokens[i]), static_cast<TokenId>(i));

  const auto pick = [n](std::optional<TokenId> v, TokenId def) {
    if (def >= 0 && static_cast<std::size_t>(def) >= n) def = null_token;
    if (v && *v >= 0 && static_cast<std::size_t>(*v) < n) return *v;
    return def;
  };
  m.bos = pick(d.bos_id, def_bos);
  m.eos = pick(d.eos_id, def_eos);
  m.unk = pick(d.unk_id, def_unk);
  m.pad = pick(d.pad_id, null_token);
  m.eot = pick(d.eot_id, null_token);
  const TokenId eom = pick(d.eom_id, null_token);
  if (d.add_bos) m.add_bos = *d.add_bos;
  if (d.add_eos) m.add_eos = *d.add_eos;
  m.chat_template = std::move(d.chat_template);

  // llama.cpp's text-based attribute fixes: EOG / EOT / FIM markers become CONTROL,
  // control tokens named "unused" become UNUSED, gpt-oss channel markers always render.
  m.eog.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view t = m.tokens[i];
    const bool is_eog = one_of(t, eog_texts);
    if (is_eog || one_of(t, fim_texts) || (m.eot == null_token && one_of(t, eot_texts))) m.attrs[i] |= attr_control;
    if (is_eog) m.eog[i] = true;
  }
  if (m.eot == null_token) {
    for (std::size_t i = 0; i < n && m.eot == null_token; ++i)
      if (one_of(std::string_view(m.tokens[i]), eot_texts)) m.eot = static_cast<TokenId>(i);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view t = m.tokens[i];
    if ((m.attrs[i] & attr_control) && t.find("unused") != std::string_view::npos) m.attrs[i] |= attr_unused;
    if (t == "<|channel|>" || t == "<|message|>" || t == "<|start|>" || t == "<|constrain|>")
      m.attrs[i] = attr_user_defined;
  }
  for (const TokenId id : {m.eos, m.eot, eom})
    if (id != null_token) m.eog[static_cast<std::size_t>(id)] = true;
  // llama.cpp's harmony / solar-open and gemma4 fixes: there "<|end|>" and "</s>" are not EOG.
  const auto eog_id = [&](std::string_view t) {
    const auto it = m.token_to_id.find(t);
    return it != m.token_to_id.end() && m.eog[static_cast<std::size_t>(it->second)] ? it->second : null_token;
  };
  const TokenId end_id = eog_id("<|end|>");
  const bool has_call = eog_id("<|call|>") != null_token || eog_id("<|calls|>") != null_token;
  if (end_id != null_token && has_call &&
      (eog_id("<|return|>") != null_token || eog_id("<|flush|>") != null_token)) {
    m.eog[static_cast<std::size_t>(end_id)] = false;
    m.attrs[static_cast<std::size_t>(end_id)] = attr_user_defined;
  }
  const TokenId s_id = eog_id("</s>");
  if (s_id != null_token && eog_id("<|tool_response>") != null_token) {
    m.eog[static_cast<std::size_t>(s_id)] = false;
    m.attrs[static_cast<std::size_t>(s_id)] = attr_normal;
  }

  for (std::size_t i = 0; i < n; ++i)
    if (m.attrs[i] & (attr_control | attr_user_defined | attr_unknown)) m.special_tokens.push_back(static_cast<TokenId>(i));
  std::stable_sort(m.special_tokens.begin(), m.special_tokens.end(), [&](TokenId a, TokenId b) {
    return m.tokens[static_cast<std::size_t>(a)].size() > m.tokens[static_cast<std::size_t>(b)].size();
  });

  // Phi-3 GGUFs rely on per-token RSTRIP that llama.cpp keys on general.name.
  std::string name = d.model_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (const TokenId id : m.special_tokens) m.attrs[static_cast<std::size_t>(id)] |= attr_rstrip;
    const auto set = [&](std::string_view t, bool on) {
      const auto it = m.token_to_id.find(t);
      if (it == m.token_to_id.end()) return;
      auto& a = m.attrs[static_cast<std::size_t>(it->second)];
      a = on ? (a | attr_rstrip) : (a & ~static_cast<std::uint32_t>(attr_rstrip));
    };
    set("</s>", true);
    set("<unk>", false);
    set("<s>", false);
    set("<|endoftext|>", false);
  }

  if (m.kind == VocabKind::Bpe) {
    m.pretok.emplace(std::span<const std::string>(m.spec->patterns));
    m.bpe.emplace(m.tokens, d.merges, m.spec->ignore_merges);
  } else {
    m.spm.emplace(m.token_to_id, m.scores, m.unk);
  }
  m.pieces.resize(n);
  for (std::size_t i = 0; i < n; ++i) m.pieces[i] = m.render_piece(static_cast<TokenId>(i));
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::string Tokenizer::Impl::render_piece(TokenId id) const {
  const auto i = static_cast<std::size_t>(id);
  const std::string& text = tokens[i];
  const std::uint32_t a = attrs[i];
  if (a & (attr_unknown | attr_control | attr_user_defined)) return text;
  if (a & attr_normal) {
    if (kind == VocabKind::Spm) {
      std::string s = text;
      replace_all(s, spm_space, " ");
      return s;
    }
    // Byte-level decode; characters outside the byte map are shown like llama.cpp does.
    std::string out;
    std::size_t pos = 0;
    while (pos < text.size()) {
      const std::size_t start = pos;
      const std::uint32_t cpt = decode_utf8_lenient(text, pos);
      std::string one;
      if (BpeModel::decode_text(text.substr(start, pos - start), one) && one.size() == 1) {
        out += one;
      } else {
        std::string enc;
        append_utf8(enc, cpt);
        out += "[UNK_BYTE_0x";
        for (const char c : enc) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
        out += text;
        out += ']';
      }
    }
    return out;
  }
  if (a & attr_byte) {
    if (text.size() >= 5) {
      const std::string hex = text.substr(3, 2);
      return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }
    return {};
  }
  return {};
}

void Tokenizer::Impl::partition(std::string_view text, bool parse_special, std::vector<Fragment>& frags) const {
  frags.clear();
  if (text.empty()) return;
  frags.push_back({null_token, 0, static_cast<std::uint32_t>(text.size())});
  std::vector<Fragment> next;
  for (const TokenId sid : special_tokens) {
    const std::uint32_t a = attrs[static_cast<std::size_t>(sid)];
    if (!parse_special && (a & (attr_control | attr_unknown))) continue;
    const std::string_view tok = tokens[static_cast<std::size_t>(sid)];
    if (text.find(tok) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token != null_token) {
        next.push_back(f);
        continue;
      }
      const std::string_view region = text.substr(0, f.end);
      std::size_t pos = f.begin;
      while (true) {
        const std::size_t m = region.find(tok, pos);
        if (m == std::string_view::npos) {
          if (pos < f.end) next.push_back({null_token, static_cast<std::uint32_t>(pos), f.end});
          break;
        }
        std::size_t left_end = m;
        if (a & attr_lstrip)
          while (left_end > pos && c_isspace(text[left_end - 1])) --left_end;
        if (left_end > pos) next.push_back({null_token, static_cast<std::uint32_t>(pos), static_cast<std::uint32_t>(left_end)});
        next.push_back({sid, 0, 0});
        pos = m + tok.size();
        if (a & attr_rstrip)
          while (pos < f.end && c_isspace(text[pos])) ++pos;
        if (pos >= f.end) break;
      }
    }
    frags.swap(next);
  }
}

void Tokenizer::Impl::encode_bpe_text(std::string_view text, std::vector<TokenId>& out) const {
  std::string canon;
  if (canonicalize_utf8(text, canon)) text = canon;
  // PCRE2 rejects surrogates, which llama.cpp lets through: match on a copy where they
  // read as U+E000 (same length and class: "other"), emit the real bytes.
  std::string match_copy;
  std::string_view match_text = text;
  for (std::size_t i = 0; i + 2 < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) == 0xED && static_cast<unsigned char>(text[i + 1]) >= 0xA0) {
      if (match_copy.empty()) match_copy.assign(text);
      match_copy[i] = static_cast<char>(0xEE);
      match_copy[i + 1] = static_cast<char>(0x80);
      match_copy[i + 2] = static_cast<char>(0x80);
    }
  }
  if (!match_copy.empty()) match_text = match_copy;

  std::vector<Piece> words;
  pretok->split(match_text, words);
  BpeScratch scratch;
  // Long texts repeat words a lot: memoise word -> ids for this call.
  const bool use_cache = words.size() > 64;
  std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache;
  std::vector<TokenId> cached_ids;
  if (use_cache) cache.reserve(words.size() / 4);
  for (const Piece& w : words) {
    const std::string_view word = text.substr(w.begin, w.end - w.begin);
    if (!use_cache || word.size() == 1) {
      bpe->encode_word(word, out, scratch);
      continue;
    }
    const auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), cached_ids.begin() + it->second.first,
                 cached_ids.begin() + it->second.first + it->second.second);
      continue;
    }
    const std::size_t before = out.size();
    bpe->encode_word(word, out, scratch);
    const auto start = static_cast<std::uint32_t>(cached_ids.size());
    cached_ids.insert(cached_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    cache.emplace(word, std::make_pair(start, static_cast<std::uint32_t>(out.size() - before)));
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& opt) const {
  std::vector<TokenId> out;
  encode(text, opt, out);
  return out;
}

void Tokenizer::encode(std::string_view text, const EncodeOptions& opt, std::vector<TokenId>& out) const {
  const Impl& m = *impl_;
  FUCINA_CHECK(text.size() < (std::size_t{1} << 31), InvalidArgument, "[tokenizer] text too large ({} bytes)",
               text.size());
  std::vector<Impl::Fragment> frags;
  m.partition(text, opt.parse_special, frags);
  if (opt.add_special && m.add_bos) {
    FUCINA_CHECK(m.bos != null_token, InvalidArgument, "[tokenizer] model asks for BOS but has no BOS token");
    out.push_back(m.bos);
  }
  if (m.kind == VocabKind::Spm) {
    SpmScratch scratch;
    std::string buf;
    bool prev_special = true;  // the first fragment gets the space prefix too
    for (const auto& f : frags) {
      if (f.token != null_token) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (m.add_space_prefix && prev_special) buf.push_back(' ');
      buf.append(text.substr(f.begin, f.end - f.begin));
      replace_all(buf, " ", spm_space);
      m.spm->encode(buf, out, scratch);
      prev_special = false;
    }
  } else {
    for (const auto& f : frags) {
      if (f.token != null_token) {
        out.push_back(f.token);
      } else {
        m.encode_bpe_text(text.substr(f.begin, f.end - f.begin), out);
      }
    }
  }
  if (opt.add_special && m.add_eos) {
    FUCINA_CHECK(m.eos != null_token, InvalidArgument, "[tokenizer] model asks for EOS but has no EOS token");
    out.push_back(m.eos);
  }
}

std::string_view Tokenizer::piece(TokenId id, bool render_special) const {
  const Impl& m = *impl_;
  FUCINA_CHECK(id >= 0 && static_cast<std::size_t>(id) < m.tokens.size(), IndexOutOfBounds,
               "[tokenizer] token id {} outside vocabulary of {}", id, m.tokens.size());
  if (!render_special && (m.attrs[static_cast<std::size_t>(id)] & (attr_unknown | attr_control))) return {};
  return m.pieces[static_cast<std::size_t>(id)];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& opt) const {
  const Impl& m = *impl_;
  bool remove_space = m.add_space_prefix && !opt.continues_text;
  if (opt.remove_special && m.add_bos && !ids.empty() && ids.front() == m.bos) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (opt.remove_special && m.add_eos && !ids.empty() && ids.back() == m.eos) ids = ids.first(ids.size() - 1);
  std::string text;
  for (const TokenId id : ids) {
    std::string_view p = piece(id, opt.render_special);
    if (remove_space && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    remove_space = false;
    text.append(p);
  }
  if (!(opt.clean_spaces && m.clean_spaces) || text.empty()) return text;

  // clean_up_tokenization_spaces, three passes exactly as llama.cpp runs them.
  std::string a;
  a.push_back(text[0]);
  for (std::size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a.push_back(x);
  }
  std::string b;
  b.push_back(a[0]);
  for (std::size_t i = 1; i < a.size(); ++i) {
    const char x = a[i];
    if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      a[++i] = '\0';
    }
    b.push_back(x);
  }
  std::string c;
  c.push_back(b[0]);
  for (std::size_t i = 1; i < b.size(); ++i) {
    const char x = b[i];
    if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (i + 2 < b.size()) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

VocabKind Tokenizer::kind() const { return impl_->kind; }
std::size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }
const std::string& Tokenizer::token_text(TokenId id) const {
  FUCINA_CHECK(id >= 0 && static_cast<std::size_t>(id) < impl_->tokens.size(), IndexOutOfBounds,
               "[tokenizer] token id {} outside vocabulary of {}", id, impl_->tokens.size());
  return impl_->tokens[static_cast<std::size_t>(id)];
}
std::uint32_t Tokenizer::token_attr(TokenId id) const {
  (void)token_text(id);
  return impl_->attrs[static_cast<std::size_t>(id)];
}
float Tokenizer::token_score(TokenId id) const {
  (void)token_text(id);
  return impl_->scores[static_cast<std::size_t>(id)];
}
TokenId Tokenizer::find_token(std::string_view text) const {
  const auto it = impl_->token_to_id.find(text);
  return it == impl_->token_to_id.end() ? null_token : it->second;
}
TokenId Tokenizer::bos_id() const { return impl_->bos; }
TokenId Tokenizer::eos_id() const { return impl_->eos; }
TokenId Tokenizer::eot_id() const { return impl_->eot; }
TokenId Tokenizer::unk_id() const { return impl_->unk; }
TokenId Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool Tokenizer::is_eog(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->eog.size() && impl_->eog[static_cast<std::size_t>(id)];
}
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const std::string& Tokenizer::pre_name() const { return impl_->pre; }

std::string StreamDecoder::push(TokenId id) {
  if (first_ && opt_.remove_special && tok_->add_bos() && id == tok_->bos_id()) {
    first_ = false;
    strip_space_ = false;
    return {};
  }
  std::string_view p = tok_->piece(id, opt_.render_special);
  if (first_ && strip_space_ && tok_->add_space_prefix() && !p.empty() && p.front() == ' ') p.remove_prefix(1);
  first_ = false;
  pending_.append(p);
  const std::size_t n = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace fucina::tokenizer
