#pragma once
// Where a UTF-8 decoder stands between characters: the phases of a byte string that can
// still be completed to valid UTF-8 (no overlong form, surrogate or code point past
// U+10FFFF). The matcher refuses exactly the bytes this refuses before asking the grammar
// anything, so a vocabulary trie can say once, per subtree, whether every token below is a
// valid continuation from each phase.
#include <cstdint>

namespace fucina::grammar {

enum class Utf8Phase : std::uint8_t {
  Clean,   // between characters
  Need1,   // one continuation byte (80..BF) to go
  Need2,   // two
  Need3,   // three
  AfterE0, // A0..BF, then one more (below: an overlong form)
  AfterED, // 80..9F, then one more (above: a surrogate)
  AfterF0, // 90..BF, then two more (below: overlong)
  AfterF4, // 80..8F, then two more (above: past U+10FFFF)
  Invalid,
};
inline constexpr int utf8_phases = 8;  // the valid ones

constexpr Utf8Phase next_utf8_phase(Utf8Phase p, std::uint8_t b) {
  const auto in = [b](int lo, int hi) { return b >= lo && b <= hi; };
  switch (p) {
    case Utf8Phase::Clean:
      if (b < 0x80) return Utf8Phase::Clean;
      if (in(0xC2, 0xDF)) return Utf8Phase::Need1;
      if (b == 0xE0) return Utf8Phase::AfterE0;
      if (b == 0xED) return Utf8Phase::AfterED;
      if (in(0xE1, 0xEF)) return Utf8Phase::Need2;
      if (b == 0xF0) return Utf8Phase::AfterF0;
      if (b == 0xF4) return Utf8Phase::AfterF4;
      if (in(0xF1, 0xF3)) return Utf8Phase::Need3;
      return Utf8Phase::Invalid;
    case Utf8Phase::Need1: return in(0x80, 0xBF) ? Utf8Phase::Clean : Utf8Phase::Invalid;
    case Utf8Phase::Need2: return in(0x80, 0xBF) ? Utf8Phase::Need1 : Utf8Phase::Invalid;
    case Utf8Phase::Need3: return in(0x80, 0xBF) ? Utf8Phase::Need2 : Utf8Phase::Invalid;
    case Utf8Phase::AfterE0: return in(0xA0, 0xBF) ? Utf8Phase::Need1 : Utf8Phase::Invalid;
    case Utf8Phase::AfterED: return in(0x80, 0x9F) ? Utf8Phase::Need1 : Utf8Phase::Invalid;
    case Utf8Phase::AfterF0: return in(0x90, 0xBF) ? Utf8Phase::Need2 : Utf8Phase::Invalid;
    case Utf8Phase::AfterF4: return in(0x80, 0x8F) ? Utf8Phase::Need2 : Utf8Phase::Invalid;
    case Utf8Phase::Invalid: return Utf8Phase::Invalid;
  }
  return Utf8Phase::Invalid;
}

}  // namespace fucina::grammar
