// Note [Grammar matcher]: hash-consed stacks, interned stack sets, cached steps.
#include "fucina/grammar/matcher.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <span>
#include <unordered_map>

#include "fucina/core/error.hpp"
#include "fucina/grammar/utf8_prefix.hpp"
#include "fucina/kernels/bits_at_most.hpp"
#include "set_automaton.hpp"

namespace fucina::grammar {

namespace {

// The smallest code point a sequence of n bytes may encode (below: an overlong form).
constexpr char32_t min_code_point[5] = {0, 0, 0x80, 0x800, 0x10000};

// Length of a UTF-8 sequence from its first byte; 0 for a byte that cannot start one.
int utf8_length(std::uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return b >= 0xC2 ? 2 : 0;  // C0/C1: overlong
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return b <= 0xF4 ? 4 : 0;
  return 0;
}

}  // namespace

// Bytes over the set DFA: a state is a set and a partial UTF-8 character, with a lazily
// filled 256-entry table of next states, so a trie walk reads one table entry per node.
// State 0 is dead. In a set whose classes hold all or none of the code points beyond ASCII,
// partial characters that differ only in bits that cannot matter any more are one state
// (what is left to check: the second byte after E0, ED, F0, F4).
class ByteAutomaton {
 public:
  explicit ByteAutomaton(const Grammar& g) : sets_(g) {
    table_.reserve(256 * 1024);  // a mask's walk makes hundreds of states: grow without copying (pages come on use)
    reset(sets_.start(), {});
  }

  std::int32_t start() const { return start_; }
  std::int32_t next(std::int32_t id, std::uint8_t b) {
    const std::size_t slot = static_cast<std::size_t>(id) * 256 + b;
    if (table_[slot] == Automaton::unknown) {
      const std::int32_t n = intern(step(states_[static_cast<std::size_t>(id)], b));
      table_[slot] = n;  // after intern: it may have grown the table
    }
    return table_[slot];
  }
  bool complete(std::int32_t id) const {
    const State& s = states_[static_cast<std::size_t>(id)];
    return s.pending == 0 && sets_.complete(s.set);
  }
  bool can_continue(std::int32_t id) const {
    const State& s = states_[static_cast<std::size_t>(id)];
    return s.pending > 0 || sets_.has_stacks(s.set);
  }

  // What state `id` makes of the trie subtree of `node` without visiting it (Note [Loops]):
  // Whole, every token allowed: its bytes are all in the set's group, a valid UTF-8
  // continuation from where the state stands in a character, and no deeper than the group
  // stays allowed. AboveControls: the same holds for the subtree cut at control characters,
  // and the group's sets refuse them, so exactly the tokens below its first control bytes
  // are refused. Walk: visit the node.
  enum class Skip { Walk, Whole, AboveControls };
  static constexpr std::size_t max_least_depth = TokenTrie::max_least_depth;
  // What a walk reads of state `id` at every node: its loop depth (exact, or a lower bound
  // measured as far as a subtree below asked; the largest there is when it is 255 bytes
  // or more, the most a trie node's least_depth says: then ask skip()) and the byte kinds
  // its loop holds whole from where it stands (none inside a character; never control
  // characters, so a subtree within them has no control byte and its least_depth is its
  // height).
  struct Known {
    std::uint16_t depth = 0;
    std::uint8_t kinds = 0;
    bool filled = false;
    bool settled = false;  // exact, or at least max_least_depth: no need measures further
  };
  // Known with the depth measured at least as far as `need` bytes: a walk asks only when
  // a subtree's kinds fit the loop, so a state below the string (after its closing quote)
  // does not measure its loops in full (a JSON space's 20 blanks), making sets nothing
  // visits.
  Known known(std::int32_t id, std::size_t need = max_least_depth) {
    const auto at = static_cast<std::size_t>(id);
    if (at < known_.size() && known_[at].filled && (known_[at].settled || known_[at].depth >= need)) return known_[at];
    return measure_known(id, need);
  }
  Skip skip(std::int32_t id, const TokenTrie& v, std::size_t node) {
    Reach& r = reach_of(id);
    if (r.exact && v.least_depth(node) > r.depth) return Skip::Walk;  // too deep, known from the node's record
    const auto reaches = [&](const Subtree& t, std::size_t need) {
      if (!(t.utf8_ok & r.phase) || !t.bytes_within(r.ascii, r.non_ascii)) return false;
      if (need > r.depth && !r.exact) {
        r.depth = sets_.loop_depth(r.set, need);
        r.exact = sets_.loop(r.set).exact;
      }
      return need <= r.depth;
    };
    if (reaches(v.below(node), v.below(node).height)) return Skip::Whole;
    // A control byte comes after at most `height` bytes: in a set of the chain (one short of
    // the depth), which refuses it.
    if (r.refuses_controls && reaches(v.above_controls(node), v.above_controls(node).height + 1u)) return Skip::AboveControls;
    return Skip::Walk;
  }

  // Note [Plain tokens]: what state `id` makes of plain text. limit: the most characters
  // of it the state allows, when that decides every plain token (those of at most as many
  // characters are allowed, the longer ones refused); -1 when it does not. It does when
  // the state stands between characters, its loop holds every plain character, and either
  // the loop's depth covers the longest plain token or, where the depth is exact, the set
  // the loop ends in (every plain character leads along the same chain of sets to it)
  // refuses every plain character. controls_refused: besides, every token of plain text
  // then a control character is refused (the loop's sets refuse control characters, and
  // so does the set it ends in).
  struct Plain {
    std::int16_t limit = unknown_limit;
    bool controls_refused = false;
  };
  Plain plain(std::int32_t id) {
    const auto at = static_cast<std::size_t>(id);
    if (plain_.size() <= at) plain_.resize(states_.size());
    if (plain_[at].limit == unknown_limit) plain_[at] = measure_plain(id);
    return plain_[at];
  }

  std::vector<std::uint64_t>* cached_mask(std::int32_t id) {
    const auto it = masks_.find(id);
    return it == masks_.end() ? nullptr : &it->second;
  }
  std::vector<std::uint64_t>& new_mask(std::int32_t id) {
    if (masks_.size() >= max_masks) masks_.clear();
    return masks_[id];
  }

  // Keeps memory bounded over a long generation: past the limits, a fresh automaton holding
  // only state `id`; returns its id there.
  std::int32_t compact(std::int32_t id) {
    if (!sets_.oversized()) return id;
    const State s = states_[static_cast<std::size_t>(id)];
    reset(sets_.rebuild(s.set), s);
    return start_;
  }

 private:
  static constexpr std::size_t max_masks = 256;
  static constexpr std::int16_t unknown_limit = -2;

  [[gnu::noinline]] Plain measure_plain(std::int32_t id) {
    const Known k = known(id);
    if ((k.kinds & byte_kind::plain) != byte_kind::plain) return {.limit = -1};
    const bool chain_refuses_controls = reach_of(id).refuses_controls;
    if (k.depth >= Vocabulary::max_plain_chars) return {Vocabulary::max_plain_chars, chain_refuses_controls};
    // Over sets, not byte states: the states along the chain are made only where a walk
    // goes (a plain character is ASCII or a whole character: no partial one between).
    std::int32_t end = states_[static_cast<std::size_t>(id)].set;
    for (std::uint16_t i = 0; i < k.depth; ++i) end = sets_.step(end, 'a');
    bool end_refuses_controls = true;
    for (char32_t c = 0; c < 0x80; ++c) {
      const auto kind = byte_kind::of(static_cast<std::uint8_t>(c));
      if ((kind & byte_kind::plain) && sets_.step(end, c) != 0) return {.limit = -1};
      if (kind == byte_kind::control && sets_.step(end, c) != 0) end_refuses_controls = false;
    }
    // A lead byte is allowed when some character it begins is (its range, no overlong form
    // or lone surrogate): over all leads, when some character beyond ASCII is.
    if (sets_.can_match_any(end, 0x80, 0x10FFFF)) return {.limit = -1};
    return {static_cast<std::int16_t>(k.depth), chain_refuses_controls && end_refuses_controls};
  }

  struct State {
    std::int32_t set = 0;
    char32_t partial = 0;      // bits of a character begun so far
    std::uint8_t pending = 0;  // continuation bytes it still needs
    std::uint8_t length = 0;   // its length in bytes (an overlong form is refused)
  };

  // Empties the byte states and tables; `current`, moved to set `set`, becomes start_.
  void reset(std::int32_t set, State current) {
    states_.clear();
    ids_ = FlatMap();
    table_.clear();
    reach_.clear();
    known_.clear();
    plain_.clear();
    masks_.clear();
    clean_ids_.clear();
    states_.push_back(State{});  // 0: dead
    table_.resize(256, Automaton::unknown);
    current.set = set;
    start_ = intern(current);
  }

  std::int32_t intern(State s) {
    if (s.set == 0) return 0;
    // Between characters (most steps of a walk), by set without hashing.
    const auto set = static_cast<std::size_t>(s.set);
    if (s.pending == 0 && set < clean_ids_.size() && clean_ids_[set] != 0) return clean_ids_[set];
    if (s.pending > 0 && sets_.uniform_beyond_ascii(s.set)) s.partial = canonical(s);
    const std::uint64_t key = (static_cast<std::uint64_t>(s.set) << 32) | (static_cast<std::uint64_t>(s.partial) << 8) |
                              (static_cast<std::uint64_t>(s.pending) << 4) | s.length;
    const auto fresh = static_cast<std::int32_t>(states_.size());
    const std::int32_t id = *ids_.find_or_insert(key, fresh);
    if (id == fresh) {
      states_.push_back(s);
      table_.resize(states_.size() * 256, Automaton::unknown);
    }
    if (s.pending == 0) {
      if (set >= clean_ids_.size()) clean_ids_.resize(std::max(set + 1, 2 * clean_ids_.size()), 0);
      clean_ids_[set] = id;
    }
    return id;
  }

  // The bits of a partial character that still decide anything when every class treats
  // the code points beyond ASCII alike: the lead of E0, ED, F0, F4 (their second byte has a
  // narrower range); past the second byte, nothing (a valid representative stands in).
  static char32_t canonical(const State& s) {
    const int done = s.length - s.pending;  // bytes seen
    if (done == 1) {
      if (s.length == 2) return 0x2;                                     // C2..DF
      if (s.length == 3) return s.partial == 0x0 || s.partial == 0xD ? s.partial : 0x1;  // E0, ED, else E1
      return s.partial == 0x0 || s.partial == 0x4 ? s.partial : 0x1;    // F0, F4, else F1
    }
    return char32_t{0x1} << (6 * (done - 1));  // E1 80 / F1 80 / F1 80 80
  }

  // Where a state stands inside a character (its lead's bits tell E0, ED, F0, F4 apart; a
  // canonical() partial keeps them).
  static Utf8Phase phase(const State& s) {
    if (s.pending == 0) return Utf8Phase::Clean;
    if (s.length - s.pending == 1) {
      if (s.length == 3 && s.partial == 0x0) return Utf8Phase::AfterE0;
      if (s.length == 3 && s.partial == 0xD) return Utf8Phase::AfterED;
      if (s.length == 4 && s.partial == 0x0) return Utf8Phase::AfterF0;
      if (s.length == 4 && s.partial == 0x4) return Utf8Phase::AfterF4;
    }
    return static_cast<Utf8Phase>(static_cast<int>(Utf8Phase::Clean) + s.pending);  // Need1..3
  }

  // One byte of UTF-8 over the set DFA (set 0 when refused).
  State step(State s, std::uint8_t b) {
    if (s.pending == 0) {
      const int len = utf8_length(b);
      if (len == 1) return {.set = sets_.step(s.set, b)};
      if (len == 0) return {};
      s.partial = b & (0x7F >> len);
      s.pending = static_cast<std::uint8_t>(len - 1);
      s.length = static_cast<std::uint8_t>(len);
    } else {
      if ((b & 0xC0) != 0x80) return {};
      s.partial = (s.partial << 6) | (b & 0x3F);
      if (--s.pending == 0) {
        const char32_t c = s.partial;
        if (c < min_code_point[s.length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {};
        return {.set = sets_.step(s.set, c)};
      }
    }
    // A character begun: some class must be able to finish it.
    const unsigned shift = 6u * s.pending;
    const char32_t lo = std::max<char32_t>(s.partial << shift, min_code_point[s.length]);
    const char32_t hi = std::min<char32_t>((s.partial << shift) | ((char32_t{1} << shift) - 1), 0x10FFFF);
    const bool surrogates_only = lo >= 0xD800 && hi <= 0xDFFF;
    if (lo > hi || surrogates_only || !sets_.can_match_any(s.set, lo, hi)) return {};
    return s;
  }

  Automaton sets_;
  std::vector<State> states_;
  FlatMap ids_;                     // packed State -> id
  std::vector<std::int32_t> clean_ids_;  // set -> the id of its state between characters (0: none yet)
  std::vector<std::int32_t> table_;  // id * 256 + byte -> id
  // A state's set's loop (Note [Loops]) and its UTF-8 phase, for skip().
  struct Reach {
    std::array<std::uint64_t, 2> ascii;
    std::int32_t set;
    std::uint16_t depth;
    std::uint8_t phase;  // 1 << Utf8Phase; 0: not filled yet
    bool non_ascii, exact, refuses_controls;
    std::uint8_t kinds;  // for known()
  };
  // known() the first time: kept apart from Reach (a walk reads it at every node it visits).
  [[gnu::noinline]] Known measure_known(std::int32_t id, std::size_t need) {
    Reach& r = reach_of(id);
    if (!r.exact && r.depth < need) {
      r.depth = sets_.loop_depth(r.set, need);
      r.exact = sets_.loop(r.set).exact;
    }
    if (known_.size() < states_.size()) known_.resize(states_.size());
    // Exact, or at least max_least_depth (then any least_depth is reached): as measured.
    const bool settled = r.exact || r.depth >= max_least_depth;
    return known_[static_cast<std::size_t>(id)] = {
               settled && !r.exact ? std::numeric_limits<std::uint16_t>::max() : r.depth, r.kinds, true, settled};
  }
  Reach& reach_of(std::int32_t id) {
    if (static_cast<std::size_t>(id) >= reach_.size()) reach_.resize(states_.size());
    Reach& r = reach_[static_cast<std::size_t>(id)];
    if (r.phase == 0) r = reach(id);
    return r;
  }
  Reach reach(std::int32_t id) {
    const State s = states_[static_cast<std::size_t>(id)];
    const auto& loop = sets_.loop(s.set);
    std::uint8_t kinds = 0;
    if (phase(s) == Utf8Phase::Clean) {
      for (const std::uint8_t k : {byte_kind::letters, byte_kind::digits, byte_kind::space, byte_kind::punctuation,
                                   byte_kind::quote_or_backslash}) {
        const auto& bytes = kind_bytes()[std::countr_zero(k)];
        if ((bytes[0] & ~loop.ascii[0]) == 0 && (bytes[1] & ~loop.ascii[1]) == 0) kinds |= k;
      }
      if (loop.non_ascii) kinds |= byte_kind::non_ascii;
    }
    return {loop.ascii,     s.set,      loop.depth,           static_cast<std::uint8_t>(1u << static_cast<int>(phase(s))),
            loop.non_ascii, loop.exact, loop.refuses_controls, kinds};
  }
  // The ASCII bytes of each byte kind (bit c of word c / 64), by the kind's bit index.
  static const std::array<std::array<std::uint64_t, 2>, 8>& kind_bytes() {
    static const auto table = [] {
      std::array<std::array<std::uint64_t, 2>, 8> t{};
      for (int c = 0; c < 128; ++c)
        t[static_cast<std::size_t>(std::countr_zero(byte_kind::of(static_cast<std::uint8_t>(c))))][c >> 6] |=
            std::uint64_t{1} << (c & 63);
      return t;
    }();
    return table;
  }
  std::vector<Reach> reach_;
  std::vector<Known> known_;
  std::vector<Plain> plain_;  // by state: plain(), unknown_limit before its first use
  std::unordered_map<std::int32_t, std::vector<std::uint64_t>> masks_;
  std::int32_t start_ = 0;
};

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  FUCINA_CHECK(grammar_ != nullptr, InvalidArgument, "[grammar] no grammar given");
  automaton_ = std::make_unique<ByteAutomaton>(*grammar_);
  state_ = automaton_->start();
}
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

std::int32_t Matcher::step(std::int32_t state, std::string_view bytes) {
  for (const char ch : bytes) {
    state = automaton_->next(state, static_cast<std::uint8_t>(ch));
    if (state == 0) return 0;
  }
  return state;
}

bool Matcher::accept(std::string_view bytes) {
  const std::int32_t next = step(state_, bytes);
  if (next == 0) return false;
  state_ = automaton_->compact(next);
  return true;
}

bool Matcher::complete() const { return automaton_->complete(state_); }
bool Matcher::can_continue() const { return automaton_->can_continue(state_); }

bool Matcher::allows(TokenId id) {
  FUCINA_CHECK(vocab_ != nullptr, InvalidArgument, "[grammar] token matching needs a vocabulary");
  if (id < 0 || static_cast<std::size_t>(id) >= vocab_->size()) return false;
  if (vocab_->is_end(id)) return complete();
  const std::string_view piece = vocab_->piece(id);
  return !piece.empty() && step(state_, piece) != 0;
}

bool Matcher::accept_token(TokenId id) {
  if (!allows(id)) return false;
  return vocab_->is_end(id) || accept(vocab_->piece(id));
}

std::size_t Matcher::allowed_prefix(std::span<const TokenId> ids) {
  FUCINA_CHECK(vocab_ != nullptr, InvalidArgument, "[grammar] token matching needs a vocabulary");
  std::int32_t state = state_;  // stepped without compact(): states stay valid until accept()
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const TokenId id = ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_->size()) return i;
    if (vocab_->is_end(id)) return automaton_->complete(state) ? i + 1 : i;
    const std::string_view piece = vocab_->piece(id);
    if (piece.empty() || (state = step(state, piece)) == 0) return i;
  }
  return ids.size();
}

namespace {
constexpr std::size_t min_skipped = 16;  // trie nodes
constexpr std::size_t first_measured = 16;  // bytes of a loop's depth a walk measures at a new state
}  // namespace

void Matcher::walk(const TokenTrie& v) {
  ByteAutomaton& a = *automaton_;
  // One pass over the trie in preorder, collecting the allowed tokens as runs of the trie
  // order; a subtree the state allows whole (Note [Loops]) is one run, one allowed but for
  // its control-character branches a few, neither visited.
  // at[d]: the state after the first d bytes.
  // known[d]: at[d]'s loop depth (the largest there is when not known: ask) and the byte
  // kinds its loop holds; a subtree whose least_depth is more is walked without asking.
  std::vector<std::int32_t> at(v.max_depth() + 1);
  std::vector<ByteAutomaton::Known> known(v.max_depth() + 1);
  at[0] = state_;
  known[0] = a.known(state_);
  runs_.clear();
  const auto allow = [&](std::uint32_t begin, std::uint32_t end) {
    if (begin == end) return;
    if (!runs_.empty() && runs_.back().second == begin) runs_.back().second = end;
    else runs_.emplace_back(begin, end);
  };
  for (std::size_t node = 1; node < v.nodes();) {
    const std::size_t d = v.depth(node);
    ByteAutomaton::Known k = known[d - 1];
    const std::uint8_t least_depth = v.least_depth(node);
    // A subtree of byte kinds the loop holds whole (its height is least_depth: no control
    // byte) is allowed from the node's own facts; else, if big enough (a small subtree is
    // cheaper to walk than to ask about), ask.
    // (The kinds are read only when the depth allows, or may once measured further: states
    // with few tokens allowed rarely get that far.)
    bool deep_enough = least_depth <= k.depth;
    const bool kinds_fit = (deep_enough || !k.settled) && least_depth < TokenTrie::max_least_depth && (v.kinds(node) & ~k.kinds) == 0;
    if (kinds_fit && !deep_enough) {
      k = known[d - 1] = a.known(at[d - 1], least_depth);
      deep_enough = least_depth <= k.depth;
    }
    const ByteAutomaton::Skip skip =
        deep_enough && kinds_fit                                              ? ByteAutomaton::Skip::Whole
        : (deep_enough || !k.settled) && v.subtree_end(node) - node >= min_skipped ? a.skip(at[d - 1], v, node)
                                                                              : ByteAutomaton::Skip::Walk;
    if (skip != ByteAutomaton::Skip::Walk) {
      std::uint32_t from = v.first_token(node);
      if (skip == ByteAutomaton::Skip::AboveControls) {
        v.for_each_control_root(node, [&](std::size_t k) {
          allow(from, v.first_token(k));
          from = v.first_token(v.subtree_end(k));
        });
      }
      allow(from, v.first_token(v.subtree_end(node)));
      node = v.subtree_end(node);
      continue;
    }
    const std::int32_t s = a.next(at[d - 1], v.byte(node));
    if (s == 0) {
      node = v.subtree_end(node);
      continue;
    }
    at[d] = s;
    // Read only by the node's children (none at a leaf): measured a little way at once (a
    // key's literal characters settle there), further only as a child's kinds ask.
    if (v.subtree_end(node) != node + 1) known[d] = a.known(s, first_measured);
    allow(v.first_token(node), v.first_token(node + 1));
    ++node;
  }
}

std::span<const std::uint64_t> Matcher::allowed() {
  FUCINA_CHECK(vocab_ != nullptr, InvalidArgument, "[grammar] token masks need a vocabulary");
  ByteAutomaton& a = *automaton_;
  if (const auto* m = a.cached_mask(state_)) return *m;
  const Vocabulary& v = *vocab_;
  std::vector<std::uint64_t>& bits = a.new_mask(state_);
  const auto set_bit = [&](TokenId id, bool on) {
    const std::uint64_t bit = std::uint64_t{1} << (id & 63);
    if (on) bits[static_cast<std::size_t>(id) >> 6] |= bit;
    else bits[static_cast<std::size_t>(id) >> 6] &= ~bit;
  };
  if (const ByteAutomaton::Plain plain = a.plain(state_); plain.limit >= 0) {
    // Note [Plain tokens]: the plain tokens by their lengths, the others by their own tries.
    bits.resize((v.size() + 63) / 64);
    kernels::bits_at_most(kernels::arch::best_arch{}, v.plain_chars().data(), v.size(),
                          static_cast<std::uint8_t>(plain.limit), bits.data());
    for (const TokenTrie* others : {&v.not_plain_trie(), plain.controls_refused ? nullptr : &v.control_trie()}) {
      if (!others) continue;
      walk(*others);
      for (const auto& [begin, end] : runs_)
        for (std::uint32_t i = begin; i < end; ++i) set_bit(others->token_in_trie_order(i), true);
    }
  } else {
    const TokenTrie& t = v.trie();
    walk(t);
    // The bits by token id: the runs set one by one, or, when they hold most tokens, all
    // set and the gaps between them cleared.
    std::size_t n_allowed = 0;
    for (const auto& [begin, end] : runs_) n_allowed += end - begin;
    const auto set_range = [&](std::uint32_t begin, std::uint32_t end, bool on) {
      for (std::uint32_t i = begin; i < end; ++i) set_bit(t.token_in_trie_order(i), on);
    };
    if (2 * n_allowed <= t.tokens_in_trie()) {
      bits.assign((v.size() + 63) / 64, 0);
      for (const auto& [begin, end] : runs_) set_range(begin, end, true);
    } else {
      bits.assign((v.size() + 63) / 64, ~std::uint64_t{0});
      if (v.size() % 64) bits.back() = (std::uint64_t{1} << (v.size() % 64)) - 1;
      for (const TokenId id : v.outside_trie()) set_bit(id, false);
      std::uint32_t gap = 0;
      for (const auto& [begin, end] : runs_) set_range(gap, begin, false), gap = end;
      set_range(gap, static_cast<std::uint32_t>(t.tokens_in_trie()), false);
    }
  }
  if (complete())
    for (const TokenId id : v.end_tokens()) set_bit(id, true);
  return bits;
}

std::size_t Matcher::mask(std::span<float> logits) {
  const auto bits = allowed();
  constexpr float refused = -std::numeric_limits<float>::infinity();
  const std::size_t n = std::min(logits.size(), vocab_->size());
  std::size_t kept = 0;
  // A word at a time: most words are all refused (a fill) or all allowed (nothing to do).
  for (std::size_t w = 0; w * 64 < n; ++w) {
    const std::uint64_t word = bits[w];
    const std::size_t base = w * 64, len = std::min<std::size_t>(64, n - base);
    kept += static_cast<std::size_t>(std::popcount(word));
    if (word == ~std::uint64_t{0}) continue;
    if (word == 0) {
      std::fill_n(logits.begin() + static_cast<std::ptrdiff_t>(base), len, refused);
      continue;
    }
    const std::uint64_t in_row = len == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << len) - 1;
    for (std::uint64_t off = ~word & in_row; off; off &= off - 1)
      logits[base + static_cast<std::size_t>(std::countr_zero(off))] = refused;
  }
  // Rows past the tokenizer's vocabulary (a model's padding) are never allowed.
  std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n), logits.end(), refused);
  return kept;
}

}  // namespace fucina::grammar
