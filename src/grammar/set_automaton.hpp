#pragma once
// The stack-set automaton under grammar::Matcher (src/grammar only): hash-consed parse
// stacks, interned stack sets and their cached steps, built lazily (Note [Grammar matcher]
// in matcher.cpp; Note [Loops] in matcher.hpp).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/grammar/grammar.hpp"

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
    // A first mask makes tens of sets: grown without copying (small enough for the heap,
    // not a fresh mapping of its own whose pages fault in on first use).
    sets_.reserve(initial_sets), loops_.reserve(initial_sets), beyond_ascii_next_.reserve(initial_sets);
    ascii_next_.reserve(initial_sets * 128);
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
  static constexpr std::size_t initial_sets = 64;
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
      std::int32_t* row = &ascii_next_[at * 128];  // after the step: it may have grown the table
      for (int w = 0; w < 2; ++w)
        for (std::uint64_t bits = loops_[at].ascii[w]; bits; bits &= bits - 1) row[w * 64 + std::countr_zero(bits)] = next;
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

}  // namespace fucina::grammar
