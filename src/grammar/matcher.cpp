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

namespace fucina::grammar {

// uint64 -> int32 with open addressing: node ids by (pos, parent), steps beyond ASCII.
class FlatMap {
 public:
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};
  std::int32_t* find_or_insert(std::uint64_t key, std::int32_t fresh) {
    if ((size_ + 1) * 2 > keys_.size()) grow();
    const std::size_t mask = keys_.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == empty_key) {
        keys_[i] = key, values_[i] = fresh, ++size_;
        return &values_[i];
      }
    }
  }

 private:
  static std::uint64_t hash(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
  }
  void grow() {
    std::vector<std::uint64_t> keys(std::max<std::size_t>(1024, keys_.size() * 2), empty_key);
    std::vector<std::int32_t> values(keys.size());
    const std::size_t mask = keys.size() - 1;
    for (std::size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == empty_key) continue;
      std::size_t i = hash(keys_[j]) & mask;
      while (keys[i] != empty_key) i = (i + 1) & mask;
      keys[i] = keys_[j], values[i] = values_[j];
    }
    keys_ = std::move(keys), values_ = std::move(values);
  }
  std::vector<std::uint64_t> keys_;
  std::vector<std::int32_t> values_;
  std::size_t size_ = 0;
};

// Set ids by their items (sorted node ids): open addressing over 64-bit hashes of the
// items, a match confirmed by comparing them (`items_of(id)`), no key copied.
class SetIndex {
 public:
  static std::uint64_t hash(std::span<const std::int32_t> items) {
    std::uint64_t h = items.size();
    for (const std::int32_t x : items) h = (h ^ static_cast<std::uint32_t>(x)) * 0x9E3779B97F4A7C15ull, h ^= h >> 29;
    return h;
  }
  // The id of the set with `items`, or `fresh` (recorded as theirs) when there is none.
  template <class ItemsOf>
  std::int32_t find_or_insert(std::span<const std::int32_t> items, std::int32_t fresh, const ItemsOf& items_of) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const std::uint64_t h = hash(items);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = {h, fresh}, ++size_;
        return fresh;
      }
      if (slot.hash == h && std::ranges::equal(items_of(slot.id), items)) return slot.id;
    }
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::int32_t id = -1;
  };
  void grow() {
    std::vector<Slot> slots(std::max<std::size_t>(256, slots_.size() * 2));
    for (const Slot& s : slots_) {
      if (s.id < 0) continue;
      std::size_t i = s.hash & (slots.size() - 1);
      while (slots[i].id >= 0) i = (i + 1) & (slots.size() - 1);
      slots[i] = s;
    }
    slots_ = std::move(slots);
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

// The lazily built DFA over stack sets. Set 0 is the empty set (no parse survives); a set
// lists node ids, -1 standing for the empty stack (the text is complete).
class Automaton {
 public:
  explicit Automaton(const Grammar& g) : g_(&g) {
    std::vector<std::int32_t> none;
    intern_set(none);  // set 0
    begin_expansion();
    for (const std::uint32_t alt : g.rules[g.root])
      expand(g.elements[alt].kind == ElementKind::End ? -1 : intern_node(alt, -1), scratch_);
    start_ = intern_set(scratch_);
  }

  std::int32_t start() const { return start_; }
  bool complete(std::int32_t set) const { return sets_[static_cast<std::size_t>(set)].complete; }
  bool has_stacks(std::int32_t set) const {
    const auto& s = sets_[static_cast<std::size_t>(set)];
    return s.size > (s.complete ? 1u : 0u);
  }

  std::int32_t step(std::int32_t set, char32_t c) {
    if (c < 128) {  // the hot path of a trie walk: one table read, inlined
      const std::int32_t next = ascii_next_[static_cast<std::size_t>(set) * 128 + c];
      if (next != unknown) return next;
    }
    return step_uncached(set, c);
  }

  // Any other step: computed once (ASCII), or looked up by the classes that hold c.
  [[gnu::noinline]] std::int32_t step_uncached(std::int32_t set, char32_t c) {
    if (c < 128) {
      const std::size_t slot = static_cast<std::size_t>(set) * 128 + c;
      if (ascii_next_[slot] == unknown) {
        const Set s = sets_[static_cast<std::size_t>(set)];
        if (s.size > max_grouped) {
          const std::int32_t next = step_by_classes(set, c);
          ascii_next_[slot] = next;  // after the step: it may have grown the table
        } else {
          // The step holds for every ASCII character the same stacks hold: all of them
          // filled at once (a walk meets most of a row).
          const std::uint32_t matched = holds_mask(set, c);
          const std::int32_t next = step_matching(set, matched);
          std::array<std::uint64_t, 2> same = {~std::uint64_t{0}, ~std::uint64_t{0}};
          for (std::uint32_t i = 0; i < s.size; ++i) {
            const std::int32_t item = items_[s.offset + i];
            if (item < 0) continue;
            const auto& cls = g_->charsets[g_->elements[nodes_[static_cast<std::size_t>(item)].pos].index].ascii;
            const bool in = (matched >> i) & 1;
            same[0] &= in ? cls[0] : ~cls[0], same[1] &= in ? cls[1] : ~cls[1];
          }
          std::int32_t* row = &ascii_next_[static_cast<std::size_t>(set) * 128];  // after the step
          for (int w = 0; w < 2; ++w)
            for (std::uint64_t bits = same[w]; bits; bits &= bits - 1) row[w * 64 + std::countr_zero(bits)] = next;
        }
      }
      return ascii_next_[slot];
    }
    // Beyond ASCII: one step for all when each class holds all or none of them.
    if (sets_[static_cast<std::size_t>(set)].uniform_beyond_ascii) {
      if (beyond_ascii_next_[static_cast<std::size_t>(set)] == unknown) {
        const std::int32_t next = step_by_classes(set, c);
        beyond_ascii_next_[static_cast<std::size_t>(set)] = next;
      }
      return beyond_ascii_next_[static_cast<std::size_t>(set)];
    }
    return step_by_classes(set, c);
  }

  // A set's classes split the code points into a few groups (in a JSON string: its
  // characters, `"`, `\`), and the step depends only on the group: it is computed once per
  // (set, the stacks whose classes hold c), so ASCII's 128 characters and a vocabulary's
  // thousands of CJK ones cost one expansion per group.
  std::int32_t step_by_classes(std::int32_t set, char32_t c) {
    const Set s = sets_[static_cast<std::size_t>(set)];
    if (s.size > max_grouped) {
      return advance(set, [&](std::uint32_t i) { return item_holds(items_[s.offset + i], c); });
    }
    return step_matching(set, holds_mask(set, c));
  }

  // The step over a character held by exactly the stacks in `matched` (bit i: item i).
  std::int32_t step_matching(std::int32_t set, std::uint32_t matched) {
    const std::uint64_t key = (static_cast<std::uint64_t>(set) << 32) | matched;
    if (const std::int32_t cached = *grouped_next_.find_or_insert(key, unknown); cached != unknown) return cached;
    const std::int32_t next = advance(set, [&](std::uint32_t i) { return (matched >> i) & 1; });
    *grouped_next_.find_or_insert(key, unknown) = next;
    return next;
  }

  // A set's loop (Note [Loops]): the group of characters it mostly moves on, where they
  // lead, and for how many bytes in a row the group stays allowed.
  struct Loop {
    std::array<std::uint64_t, 2> ascii{};  // the group's ASCII characters
    bool non_ascii = false;                // it holds every code point beyond ASCII too
    bool refuses_controls = false;         // no stack holds a control character (Vocabulary::is_control)
    std::uint32_t stacks = 0;              // the stacks holding its characters (bit i: item i); 0: no group
    std::int32_t next = 0;                 // the set they lead to, once followed (follow())
    // Any valid UTF-8 of at most `depth` bytes over the group is allowed; `exact`: no more
    // (else a lower bound, measured only as far as asked).
    std::uint16_t depth = 0;
    bool exact = false;
    std::uint8_t status = 0;  // unknown, grouped, on the chain being measured
  };

  const Loop& loop(std::int32_t set) {
    grouped(set);
    return loops_[static_cast<std::size_t>(set)];
  }

  // The set's loop depth, measured far enough to tell whether it is at least `need`: follow
  // the chain set -> next -> ... while each group is within the next's, so that a string
  // over the first group stays allowed one character per set (and, if the first refuses
  // control characters, each set on the way does too). depth = 1 + the next's depth
  // (0 without a group); a cycle allows any length.
  std::uint16_t loop_depth(std::int32_t set, std::size_t need) {
    constexpr std::uint32_t unbounded = std::numeric_limits<std::uint16_t>::max();
    const Loop& first = loop(set);
    if (first.exact || first.depth >= need) return first.depth;
    chain_.clear();
    std::uint32_t tail = 0;  // the depth after the chain's last set
    bool exact = true;
    for (std::int32_t cur = set;;) {
      const Loop l = grouped(cur);
      if (cur != set && (l.exact || l.depth + chain_.size() >= need)) {
        tail = l.depth, exact = l.exact;
        break;
      }
      if (l.status == on_chain) {
        tail = unbounded;
        break;
      }
      if (l.stacks == 0) break;
      loops_[static_cast<std::size_t>(cur)].status = on_chain;
      chain_.push_back(cur);
      if (chain_.size() >= need) {  // far enough: the depths stay lower bounds
        exact = false;
        break;
      }
      const std::int32_t next = follow(cur);
      const Loop n = grouped(next);
      const bool within = (l.ascii[0] & ~n.ascii[0]) == 0 && (l.ascii[1] & ~n.ascii[1]) == 0 &&
                          (!l.non_ascii || n.non_ascii) && (!l.refuses_controls || n.refuses_controls);
      if (!within) break;
      cur = next;
    }
    if (chain_.empty()) loops_[static_cast<std::size_t>(set)].exact = true;  // no group: depth 0
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
      tail = std::min(tail + 1, unbounded);
      Loop& l = loops_[static_cast<std::size_t>(*it)];
      l.depth = static_cast<std::uint16_t>(tail), l.exact = exact, l.status = grouped_loop;
    }
    return loops_[static_cast<std::size_t>(set)].depth;
  }

  // Whether a stack of `set` can match some code point in [lo, hi].
  bool can_match_any(std::int32_t set, char32_t lo, char32_t hi) const {
    const Set s = sets_[static_cast<std::size_t>(set)];
    if (s.uniform_beyond_ascii && lo >= 0x80) return s.any_beyond_ascii;
    for (std::uint32_t i = 0; i < s.size; ++i) {
      const std::int32_t item = items_[s.offset + i];
      if (item >= 0 && g_->charsets[g_->elements[nodes_[static_cast<std::size_t>(item)].pos].index].intersects(lo, hi))
        return true;
    }
    return false;
  }

  bool oversized() const { return nodes_.size() > max_nodes || sets_.size() > max_sets; }
  bool uniform_beyond_ascii(std::int32_t set) const { return sets_[static_cast<std::size_t>(set)].uniform_beyond_ascii; }
  static constexpr std::int32_t unknown = -2;

  // A fresh automaton holding only `set` (the others and every cache dropped); returns the
  // set's id there. Keeps memory bounded over a long generation.
  std::int32_t rebuild(std::int32_t set) {
    Automaton fresh(*g_);
    std::vector<std::int32_t> items;
    const Set s = sets_[static_cast<std::size_t>(set)];
    for (std::uint32_t i = 0; i < s.size; ++i) items.push_back(fresh.copy_stack(*this, items_[s.offset + i]));
    const std::int32_t id = fresh.intern_set(items);
    *this = std::move(fresh);
    return id;
  }

 private:
  static constexpr std::size_t max_nodes = std::size_t{1} << 22, max_sets = std::size_t{1} << 16;
  static constexpr std::uint32_t max_grouped = 32;  // stacks in a set stepped by groups (a bit each)
  enum : std::uint8_t { unknown_loop, grouped_loop, on_chain };

  struct Node {
    std::uint32_t pos;     // an element of kind Chars (what to match) or, below the top, Rule/Chars
    std::int32_t parent;   // the stack below; -1: none
  };
  struct Set {
    std::uint32_t offset, size;
    bool complete;
    // Every stack's class holds all code points beyond ASCII or none (CharSet::beyond_ascii):
    // then one step serves them all, and any partial character is viable iff some does.
    bool uniform_beyond_ascii;
    bool any_beyond_ascii;
  };

  bool item_holds(std::int32_t item, char32_t c) const {
    return item >= 0 && g_->charsets[g_->elements[nodes_[static_cast<std::size_t>(item)].pos].index].contains(c);
  }
  std::uint32_t holds_mask(std::int32_t set, char32_t c) const {
    const Set s = sets_[static_cast<std::size_t>(set)];
    std::uint32_t matched = 0;
    for (std::uint32_t i = 0; i < s.size; ++i)
      if (item_holds(items_[s.offset + i], c)) matched |= std::uint32_t{1} << i;
    return matched;
  }

  // The set's group (Note [Loops]) found once: the stacks holding the code points beyond
  // ASCII when each class holds all or none of them (a string's characters), else the
  // stacks holding the most ASCII characters; its characters are those held by exactly
  // those stacks.
  Loop grouped(std::int32_t set) {
    if (loops_.size() < sets_.size()) loops_.resize(sets_.size());
    if (loops_[static_cast<std::size_t>(set)].status != unknown_loop) return loops_[static_cast<std::size_t>(set)];
    Loop l;
    l.status = grouped_loop;
    const Set s = sets_[static_cast<std::size_t>(set)];
    if (s.size <= max_grouped) {
      // ASCII split into blocks by which stacks hold its characters, one stack at a time.
      struct Block {
        std::array<std::uint64_t, 2> chars;
        std::uint32_t stacks;
      };
      std::array<Block, 129> blocks;
      std::size_t n = 1;
      blocks[0] = {{~std::uint64_t{0}, ~std::uint64_t{0}}, 0};
      for (std::uint32_t i = 0; i < s.size; ++i) {
        const std::int32_t item = items_[s.offset + i];
        if (item < 0) continue;
        const auto& cls = g_->charsets[g_->elements[nodes_[static_cast<std::size_t>(item)].pos].index].ascii;
        for (std::size_t k = 0, old = n; k < old; ++k) {
          const std::array<std::uint64_t, 2> in = {blocks[k].chars[0] & cls[0], blocks[k].chars[1] & cls[1]};
          const std::array<std::uint64_t, 2> out = {blocks[k].chars[0] & ~cls[0], blocks[k].chars[1] & ~cls[1]};
          if ((in[0] | in[1]) == 0) continue;
          if (out[0] | out[1]) blocks[n++] = {out, blocks[k].stacks};
          blocks[k] = {in, blocks[k].stacks | std::uint32_t{1} << i};
        }
      }
      const bool beyond = s.uniform_beyond_ascii && s.any_beyond_ascii;
      std::uint32_t group = beyond ? holds_mask(set, 0x80) : 0;
      int best = 0;
      for (std::size_t k = 0; k < n && !beyond; ++k) {
        const int size = std::popcount(blocks[k].chars[0]) + std::popcount(blocks[k].chars[1]);
        if (blocks[k].stacks != 0 && size > best) best = size, group = blocks[k].stacks;
      }
      if (group != 0) {
        std::array<std::uint64_t, 2> refused{};
        for (std::size_t k = 0; k < n; ++k) {
          if (blocks[k].stacks == group) l.ascii = blocks[k].chars;
          if (blocks[k].stacks == 0) refused = blocks[k].chars;
        }
        constexpr std::array<std::uint64_t, 2> controls = {0xFFFFFFFFull, std::uint64_t{1} << 63};  // 00..1F, 7F
        l.refuses_controls = (controls[0] & ~refused[0]) == 0 && (controls[1] & ~refused[1]) == 0;
        l.non_ascii = beyond;
        l.stacks = group;
      }
    }
    loops_[static_cast<std::size_t>(set)] = l;
    return l;
  }

  // The set the group of `set` leads to, made on first use (with the steps of the group's
  // ASCII characters, known then too).
  std::int32_t follow(std::int32_t set) {
    const auto at = static_cast<std::size_t>(set);
    if (loops_[at].next == 0) {
      const std::int32_t next = step_matching(set, loops_[at].stacks);
      loops_[at].next = next;
      for (char32_t c = 0; c < 128; ++c)
        if ((loops_[at].ascii[c >> 6] >> (c & 63)) & 1) ascii_next_[at * 128 + c] = next;
    }
    return loops_[at].next;
  }

  std::int32_t copy_stack(const Automaton& from, std::int32_t n) {
    if (n < 0) return -1;
    const Node node = from.nodes_[static_cast<std::size_t>(n)];
    return intern_node(node.pos, copy_stack(from, node.parent));
  }

  // The node (pos, parent), made once: equal stacks are one node.
  std::int32_t intern_node(std::uint32_t pos, std::int32_t parent) {
    const auto fresh = static_cast<std::int32_t>(nodes_.size());
    const std::int32_t id =
        *node_ids_.find_or_insert((static_cast<std::uint64_t>(pos) << 32) | static_cast<std::uint32_t>(parent + 1), fresh);
    if (id == fresh) nodes_.push_back({pos, parent});
    return id;
  }

  // The set after one character: the stacks whose top class holds it (holds(i) for item i)
  // advanced past it and expanded.
  template <class Holds>
  std::int32_t advance(std::int32_t set, const Holds& holds) {
    scratch_.clear();
    begin_expansion();
    const Set s = sets_[static_cast<std::size_t>(set)];
    for (std::uint32_t i = 0; i < s.size; ++i) {
      if (!holds(i)) continue;
      const Node n = nodes_[static_cast<std::size_t>(items_[s.offset + i])];
      const std::uint32_t next = n.pos + 1;
      expand(g_->elements[next].kind == ElementKind::End ? n.parent : intern_node(next, n.parent), scratch_);
    }
    return intern_set(scratch_);
  }

  void begin_expansion() {
    if (++epoch_ == 0) std::fill(expanded_.begin(), expanded_.end(), 0), epoch_ = 1;
  }

  // Appends the stacks `stack` stands for with a character class on top: a rule on top is
  // replaced by each of its alternatives (an empty one: the stack below, expanded too).
  void expand(std::int32_t stack, std::vector<std::int32_t>& out) {
    if (stack < 0) {
      out.push_back(-1);
      return;
    }
    const Node n = nodes_[static_cast<std::size_t>(stack)];
    const Element e = g_->elements[n.pos];
    if (e.kind == ElementKind::Chars) {
      out.push_back(stack);
      return;
    }
    // A stack met again in one expansion (a cycle through rules that derive nothing, which
    // the parser allows when it does not grow the stack) has its results in `out` already.
    if (expanded_.size() < nodes_.size()) expanded_.resize(nodes_.size() * 2, 0);
    if (expanded_[static_cast<std::size_t>(stack)] == epoch_) return;
    expanded_[static_cast<std::size_t>(stack)] = epoch_;
    const std::int32_t rest = g_->elements[n.pos + 1].kind == ElementKind::End ? n.parent : intern_node(n.pos + 1, n.parent);
    for (const std::uint32_t alt : g_->rules[e.index])
      expand(g_->elements[alt].kind == ElementKind::End ? rest : intern_node(alt, rest), out);
  }

  std::int32_t intern_set(std::vector<std::int32_t>& items) {
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
    const auto fresh = static_cast<std::int32_t>(sets_.size());
    const std::int32_t id = set_ids_.find_or_insert(items, fresh, [&](std::int32_t set) {
      const Set& s = sets_[static_cast<std::size_t>(set)];
      return std::span<const std::int32_t>(items_.data() + s.offset, s.size);
    });
    if (id != fresh) return id;
    bool uniform = true, any = false;
    for (const std::int32_t item : items) {
      if (item < 0) continue;
      const std::uint8_t b = g_->charsets[g_->elements[nodes_[static_cast<std::size_t>(item)].pos].index].beyond_ascii;
      uniform &= b != 0;
      any |= b == 2;
    }
    sets_.push_back({static_cast<std::uint32_t>(items_.size()), static_cast<std::uint32_t>(items.size()),
                     !items.empty() && items.front() == -1, uniform, any});
    beyond_ascii_next_.push_back(unknown);
    items_.insert(items_.end(), items.begin(), items.end());
    ascii_next_.resize(sets_.size() * 128, unknown);
    return id;
  }

  const Grammar* g_;
  std::vector<Node> nodes_;
  FlatMap node_ids_;                      // pos << 32 | parent + 1 -> node
  std::vector<Set> sets_;
  std::vector<std::int32_t> items_;
  SetIndex set_ids_;
  std::vector<std::int32_t> ascii_next_;                     // set * 128 + c -> set
  FlatMap grouped_next_;                   // set << 32 | stacks holding c -> set
  std::vector<std::int32_t> beyond_ascii_next_;  // set -> set, for uniform_beyond_ascii sets
  std::vector<std::int32_t> scratch_;
  std::vector<std::uint32_t> expanded_;  // node -> epoch of the expansion that met it
  std::vector<Loop> loops_;              // set -> its loop (Note [Loops])
  std::vector<std::int32_t> chain_;
  std::uint32_t epoch_ = 0;
  std::int32_t start_ = 0;
};

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
  // What a walk reads of state `id` at every node: its loop depth (measured up to 255
  // bytes, the most a trie node's least_depth says; the largest there is when it is longer:
  // then ask skip()) and the byte kinds its loop holds whole from where it stands (none
  // inside a character; never control characters, so a subtree within them has no
  // control byte and its least_depth is its height).
  struct Known {
    std::uint16_t depth = 0;
    std::uint8_t kinds = 0;
    bool filled = false;
  };
  Known known(std::int32_t id) {
    const auto at = static_cast<std::size_t>(id);
    if (at < known_.size() && known_[at].filled) return known_[at];
    return measure_known(id);
  }
  Skip skip(std::int32_t id, const Vocabulary& v, std::size_t node) {
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
  [[gnu::noinline]] Known measure_known(std::int32_t id) {
    Reach& r = reach_of(id);
    if (!r.exact && r.depth < 255) {
      r.depth = sets_.loop_depth(r.set, 255);
      r.exact = sets_.loop(r.set).exact;
    }
    if (known_.size() < states_.size()) known_.resize(states_.size());
    return known_[static_cast<std::size_t>(id)] = {r.exact ? r.depth : std::numeric_limits<std::uint16_t>::max(), r.kinds, true};
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
}  // namespace

std::span<const std::uint64_t> Matcher::allowed() {
  FUCINA_CHECK(vocab_ != nullptr, InvalidArgument, "[grammar] token masks need a vocabulary");
  ByteAutomaton& a = *automaton_;
  if (const auto* m = a.cached_mask(state_)) return *m;
  const Vocabulary& v = *vocab_;
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
    const ByteAutomaton::Known k = known[d - 1];
    const std::uint8_t least_depth = v.least_depth(node);
    // A subtree of byte kinds the loop holds whole (its height is least_depth: no control
    // byte) is allowed from the node's own facts; else, if big enough (a small subtree is
    // cheaper to walk than to ask about), ask.
    // (The kinds are read only when the depth allows: states with few tokens allowed
    // rarely get that far.)
    const bool deep_enough = least_depth <= k.depth;
    const ByteAutomaton::Skip skip =
        deep_enough && least_depth < 255 && (v.kinds(node) & ~k.kinds) == 0 ? ByteAutomaton::Skip::Whole
        : deep_enough && v.subtree_end(node) - node >= min_skipped         ? a.skip(at[d - 1], v, node)
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
    known[d] = a.known(s);
    allow(v.first_token(node), v.first_token(node + 1));
    ++node;
  }
  // The bits by token id: the runs set one by one, or, when they hold most tokens, all set
  // and the gaps between them cleared.
  std::vector<std::uint64_t>& bits = a.new_mask(state_);
  std::size_t n_allowed = 0;
  for (const auto& [begin, end] : runs_) n_allowed += end - begin;
  const auto set_bit = [&](TokenId id, bool on) {
    const std::uint64_t bit = std::uint64_t{1} << (id & 63);
    if (on) bits[static_cast<std::size_t>(id) >> 6] |= bit;
    else bits[static_cast<std::size_t>(id) >> 6] &= ~bit;
  };
  const auto set_range = [&](std::uint32_t begin, std::uint32_t end, bool on) {
    for (std::uint32_t i = begin; i < end; ++i) set_bit(v.token_in_trie_order(i), on);
  };
  if (2 * n_allowed <= v.tokens_in_trie()) {
    bits.assign((v.size() + 63) / 64, 0);
    for (const auto& [begin, end] : runs_) set_range(begin, end, true);
  } else {
    bits.assign((v.size() + 63) / 64, ~std::uint64_t{0});
    if (v.size() % 64) bits.back() = (std::uint64_t{1} << (v.size() % 64)) - 1;
    for (const TokenId id : v.outside_trie()) set_bit(id, false);
    std::uint32_t gap = 0;
    for (const auto& [begin, end] : runs_) set_range(gap, begin, false), gap = end;
    set_range(gap, static_cast<std::uint32_t>(v.tokens_in_trie()), false);
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
