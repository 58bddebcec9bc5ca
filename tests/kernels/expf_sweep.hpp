#pragma once
// Bit patterns through an arm of kernels::expf_glibc and through libm's expf, compared bit
// for bit (shared by expf_test.cpp and the exhaustive expf_slow_test.cpp).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fucina/kernels/expf.hpp"

namespace fucina::kernels::expf_check {

struct Mismatches {
  std::uint64_t count = 0;
  std::string first;  // the first few, "x: libm vs ours"
};

// Compares the floats with bit patterns first, first + stride, ... (count of them).
template <class Arch>
Mismatches sweep(std::uint64_t first, std::uint64_t count, std::uint64_t stride = 1) {
  constexpr std::uint64_t kBatch = 1 << 14;
  std::vector<float> x(kBatch), want(kBatch), got(kBatch);
  Mismatches m;
  for (std::uint64_t done = 0; done < count; done += kBatch) {
    const std::uint64_t n = std::min(kBatch, count - done);
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto bits = static_cast<std::uint32_t>(first + (done + i) * stride);
      std::memcpy(&x[i], &bits, sizeof bits);
      want[i] = expf(x[i]);
    }
    expf_glibc(Arch{}, x.data(), got.data(), static_cast<std::int64_t>(n));
    for (std::uint64_t i = 0; i < n; ++i)
      if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0 && m.count++ < 5) {
        char line[128];
        std::snprintf(line, sizeof line, "expf(%a): libm %a, ours %a\n", static_cast<double>(x[i]),
                      static_cast<double>(want[i]), static_cast<double>(got[i]));
        m.first += line;
      }
  }
  return m;
}

}  // namespace fucina::kernels::expf_check
