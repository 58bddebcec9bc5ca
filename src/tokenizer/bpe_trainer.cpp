#include "fucina/tokenizer/bpe_trainer.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "fucina/core/error.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/tokenizer/bpe_model.hpp"
#include "fucina/tokenizer/pretokenizer.hpp"

namespace fucina::tokenizer {

namespace {

using Id = std::int32_t;
using Pair = std::uint64_t;  // (left << 32) | right

Pair pair_of(Id a, Id b) { return (static_cast<Pair>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b); }
Id left_of(Pair p) { return static_cast<Id>(p >> 32); }
Id right_of(Pair p) { return static_cast<Id>(p & 0xffffffffu); }

std::string spell_byte(std::uint8_t b) {
  const std::uint32_t c = BpeModel::byte_to_cpt(b);
  std::string s;
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else {  // byte_to_cpt stays below U+0800
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return s;
}

struct Word {
  std::vector<Id> symbols;
  std::int64_t count = 0;
};

// Pair counts with a lazy max-heap: an entry is current when its count equals the map's.
class PairCounts {
 public:
  void add(Pair p, std::int64_t n, std::int32_t word) {
    const std::int64_t c = count_[p] += n;
    if (c <= 0) {
      count_.erase(p);
      return;
    }
    heap_.push({c, ~p});  // every new count: ~p puts the smaller pair first among equal counts
    if (n > 0) words_[p].push_back(word);
  }
  // The most frequent current pair with a count >= min, or false.
  bool best(std::int64_t min, Pair& p, std::int64_t& c) {
    while (!heap_.empty()) {
      const auto [hc, np] = heap_.top();
      const Pair q = ~np;
      const auto it = count_.find(q);
      if (it == count_.end() || it->second != hc) {
        heap_.pop();
        continue;
      }
      if (hc < min) return false;
      p = q, c = hc;
      return true;
    }
    return false;
  }
  // The words that held p at some time (a superset of those that hold it now), once.
  std::vector<std::int32_t> take_words(Pair p) {
    std::vector<std::int32_t> w = std::move(words_[p]);
    words_.erase(p);
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
    return w;
  }
  void erase(Pair p) { count_.erase(p); }

 private:
  std::unordered_map<Pair, std::int64_t> count_;
  std::unordered_map<Pair, std::vector<std::int32_t>> words_;
  std::priority_queue<std::pair<std::int64_t, Pair>> heap_;
};

}  // namespace

TrainedVocab train_bpe(std::span<const std::string> texts, const BpeTrainOptions& o) {
  const auto n_special = static_cast<std::int64_t>(o.special.size());
  FUCINA_CHECK(o.vocab_size >= 256 + n_special, InvalidArgument,
               "[vocab] a byte-level vocabulary needs at least {} tokens (256 bytes + {} special), got {}", 256 + n_special,
               n_special, o.vocab_size);
  FUCINA_CHECK(o.min_frequency >= 1, InvalidArgument, "[vocab] min frequency must be at least 1");
  FUCINA_CHECK(PreTokenizer::is_known(o.pre), InvalidArgument, "[vocab] unknown pre-tokenizer '{}'", o.pre);
  const PreTokenizer pre = PreTokenizer::for_name(o.pre);

  // Distinct words and their counts.
  std::unordered_map<std::string, std::int64_t> counts;
  std::vector<Piece> pieces;
  for (const std::string& text : texts) {
    pre.split(text, pieces);
    for (const Piece& p : pieces) ++counts[text.substr(p.begin, p.end - p.begin)];
  }
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());  // a fixed order: the result depends on the text only
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    Word word;
    word.count = c;
    for (unsigned char b : w) word.symbols.push_back(b);
    words.push_back(std::move(word));
  }

  TrainedVocab v;
  v.pre = o.pre;
  std::vector<std::string> raw;  // raw bytes per token
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(spell_byte(static_cast<std::uint8_t>(b)));
    raw.emplace_back(1, static_cast<char>(b));
  }
  PairCounts pc;
  for (std::size_t w = 0; w < words.size(); ++w)
    for (std::size_t i = 0; i + 1 < words[w].symbols.size(); ++i)
      pc.add(pair_of(words[w].symbols[i], words[w].symbols[i + 1]), words[w].count, static_cast<std::int32_t>(w));

  const std::int64_t n_merges = o.vocab_size - 256 - n_special;
  Pair best = 0;
  std::int64_t best_count = 0;
  while (static_cast<std::int64_t>(v.merges.size()) < n_merges && pc.best(o.min_frequency, best, best_count)) {
    const Id a = left_of(best), b = right_of(best), id = static_cast<Id>(v.tokens.size());
    v.merges.push_back(v.tokens[static_cast<std::size_t>(a)] + " " + v.tokens[static_cast<std::size_t>(b)]);
    v.tokens.push_back(v.tokens[static_cast<std::size_t>(a)] + v.tokens[static_cast<std::size_t>(b)]);
    raw.push_back(raw[static_cast<std::size_t>(a)] + raw[static_cast<std::size_t>(b)]);
    pc.erase(best);
    for (const std::int32_t wi : pc.take_words(best)) {
      Word& w = words[static_cast<std::size_t>(wi)];
      std::vector<Id>& s = w.symbols;
      // Remove the word's old pairs, merge left to right, add its new pairs.
      for (std::size_t i = 0; i + 1 < s.size(); ++i)
        if (pair_of(s[i], s[i + 1]) != best) pc.add(pair_of(s[i], s[i + 1]), -w.count, wi);
      std::vector<Id> merged;
      merged.reserve(s.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(s[i]);
        }
      }
      s = std::move(merged);
      for (std::size_t i = 0; i + 1 < s.size(); ++i) pc.add(pair_of(s[i], s[i + 1]), w.count, wi);
    }
  }
  v.types.assign(v.tokens.size(), 1);
  for (const std::string& sp : o.special) {
    v.tokens.push_back(sp);
    v.types.push_back(3);
  }
  if (n_special > 0) v.bos = v.eos = static_cast<std::int32_t>(v.tokens.size() - o.special.size());
  return v;
}

void write_vocab_gguf(const std::filesystem::path& out, const TrainedVocab& v) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.type", "vocab");
  w.set_string("general.name", "fucina BPE vocabulary");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(v.tokens));
  w.set_array("tokenizer.ggml.token_type", std::span<const std::int32_t>(v.types));
  w.set_string_array("tokenizer.ggml.merges", std::span<const std::string>(v.merges));
  if (v.bos >= 0) {
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(v.bos));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(v.eos));
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_bool("tokenizer.ggml.add_eos_token", false);
  }
  w.write_file(out);
}

}  // namespace fucina::tokenizer
