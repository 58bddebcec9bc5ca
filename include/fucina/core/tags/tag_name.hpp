#pragma once
// Axis tags are compile-time data: a TagName is a short string usable as a template
// argument, so Tensor<"batch","in"> names its axes in the type. Two tags are the same
// tag iff they are spelled the same. Tag<"in"> turns a name into a type.
#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

namespace fucina {

struct TagName {
  static constexpr std::size_t kMax = 31;
  char chars[kMax + 1]{};

  constexpr TagName() = default;
  template <std::size_t N>
  consteval TagName(const char (&s)[N]) {  // NOLINT: implicit on purpose ("batch")
    static_assert(N >= 2, "a tag name cannot be empty");
    static_assert(N - 1 <= kMax, "a tag name is at most 31 characters");
    for (std::size_t i = 0; i + 1 < N; ++i) chars[i] = s[i];
  }
  constexpr std::string_view view() const {
    std::size_t n = 0;
    while (n < kMax && chars[n] != '\0') ++n;
    return {chars, n};
  }
  constexpr bool operator==(const TagName&) const = default;
};

template <TagName T>
struct Tag {
  static constexpr TagName name = T;
};

// Positional tags for rank-only tensors (RankTensor<2> == Tensor<"_0","_1">).
inline constexpr std::array<TagName, 8> kPositionalTags{"_0", "_1", "_2", "_3", "_4", "_5", "_6", "_7"};

}  // namespace fucina
