#pragma once
// The untagged tensor every kernel sees: a buffer, a runtime rank <= 8, sizes and element
// strides, and an element offset. Copying a RawTensor retains the buffer (a view).
#include <array>
#include <cstdint>
#include <span>

#include "fucina/core/buffer.hpp"
#include "fucina/core/dtype.hpp"

namespace fucina {

inline constexpr int kMaxRank = 8;
using Dims = std::array<std::int64_t, kMaxRank>;

struct RawTensor {
  BufferRef buf;
  DType dtype = DType::f32;
  int rank = 0;
  Dims shape{};
  Dims strides{};  // in elements; 0 on a broadcast axis
  std::int64_t offset = 0;

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  bool is_contiguous() const noexcept {
    std::int64_t expect = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  template <class T>
  T* data() const noexcept {
    return reinterpret_cast<T*>(buf.bytes()) + offset;
  }
  std::span<const std::int64_t> sizes() const noexcept { return {shape.data(), static_cast<size_t>(rank)}; }
};

// Row-major strides for `shape`.
inline Dims contiguous_strides(const Dims& shape, int rank) {
  Dims s{};
  std::int64_t acc = 1;
  for (int i = rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

}  // namespace fucina
