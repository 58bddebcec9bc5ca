#pragma once
// Constexpr algebra over tag lists (std::array<TagName, N>): lookup, set operations and
// the result-tag rules of pointwise ops, dot and einsum. Everything here runs at compile
// time; the tensor facade turns the resulting arrays back into types.
#include <array>
#include <cstddef>

#include "fucina/core/tags/tag_name.hpp"

namespace fucina::tags {

template <std::size_t N>
using List = std::array<TagName, N>;

template <std::size_t N>
constexpr int index_of(const List<N>& l, TagName t) {
  for (std::size_t i = 0; i < N; ++i)
    if (l[i] == t) return static_cast<int>(i);
  return -1;
}

template <std::size_t N>
constexpr bool contains(const List<N>& l, TagName t) {
  return index_of(l, t) >= 0;
}

template <std::size_t N>
constexpr bool unique(const List<N>& l) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j)
      if (l[i] == l[j]) return false;
  return true;
}

// Same tags, any order.
template <std::size_t N, std::size_t M>
constexpr bool same_set(const List<N>& a, const List<M>& b) {
  if (N != M) return false;
  for (auto t : a)
    if (!contains(b, t)) return false;
  return true;
}

// Tags of `a` not in `b`, in a's order.
template <std::size_t N, std::size_t M>
constexpr std::size_t count_minus(const List<N>& a, const List<M>& b) {
  std::size_t n = 0;
  for (auto t : a) n += contains(b, t) ? 0 : 1;
  return n;
}

template <std::size_t N, std::size_t M>
constexpr std::size_t count_common(const List<N>& a, const List<M>& b) {
  return N - count_minus(a, b);
}

template <std::size_t K, std::size_t N, std::size_t M>
constexpr List<K> minus(const List<N>& a, const List<M>& b) {
  List<K> out{};
  std::size_t k = 0;
  for (auto t : a)
    if (!contains(b, t)) out[k++] = t;
  return out;
}

template <std::size_t K, std::size_t N, std::size_t M>
constexpr List<K> common(const List<N>& a, const List<M>& b) {
  List<K> out{};
  std::size_t k = 0;
  for (auto t : a)
    if (contains(b, t)) out[k++] = t;
  return out;
}

template <std::size_t N, std::size_t M>
constexpr List<N + M> concat(const List<N>& a, const List<M>& b) {
  List<N + M> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i];
  for (std::size_t i = 0; i < M; ++i) out[N + i] = b[i];
  return out;
}

// Pointwise broadcast by name: left tags, then right-only tags.
template <auto A, auto B>
constexpr auto pointwise_result() {
  constexpr std::size_t extra = count_minus(B, A);
  return concat(A, minus<extra>(B, A));
}

// dot over the contracted tags C: batch (shared, kept; left order) ++ left-free ++ right-free.
template <auto A, auto B, auto C>
constexpr auto dot_result() {
  constexpr auto shared = common<count_common(A, B)>(A, B);
  constexpr auto batch = minus<count_minus(shared, C)>(shared, C);
  constexpr auto left_free = minus<count_minus(A, B)>(A, B);
  constexpr auto right_free = minus<count_minus(B, A)>(B, A);
  return concat(concat(batch, left_free), right_free);
}

}  // namespace fucina::tags
