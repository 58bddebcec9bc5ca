#pragma once
// Readers for the committed ggml goldens in tests/data/quant (format: README.md there).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "support/shared_dir.hpp"

namespace fucina::quant::test {

inline constexpr int kRows = 12;
inline constexpr int kN = 512;

inline std::vector<char> read_all(const std::string& name) {
  const auto path = fucina::test::test_data_dir() / "quant" / name;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing golden " << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::vector<float> inputs() {
  const auto raw = read_all("inputs.f32");
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), v.size() * 4);
  EXPECT_EQ(v.size(), static_cast<std::size_t>(kRows * kN));
  return v;
}

// One "FQG1" file: encoded rows followed by ggml's dequantization of them.
struct Golden {
  std::uint32_t type = 0;
  std::uint32_t row_bytes = 0;
  std::vector<std::uint8_t> enc;  // kRows * row_bytes
  std::vector<float> deq;         // kRows * kN
  const std::uint8_t* row(int r) const { return enc.data() + static_cast<std::size_t>(r) * row_bytes; }
};

inline Golden load_golden(const std::string& name) {
  const auto raw = read_all(name);
  Golden g;
  std::uint32_t hdr[4] = {};  // type, rows, n, row_bytes
  if (raw.size() < 20 || std::memcmp(raw.data(), "FQG1", 4) != 0) {
    ADD_FAILURE() << name << ": bad golden header";
    return g;
  }
  std::memcpy(hdr, raw.data() + 4, sizeof(hdr));
  g.type = hdr[0];
  g.row_bytes = hdr[3];
  EXPECT_EQ(hdr[1], static_cast<std::uint32_t>(kRows));
  EXPECT_EQ(hdr[2], static_cast<std::uint32_t>(kN));
  const std::size_t enc_bytes = static_cast<std::size_t>(kRows) * g.row_bytes;
  EXPECT_EQ(raw.size(), 20 + enc_bytes + static_cast<std::size_t>(kRows) * kN * 4);
  g.enc.assign(raw.begin() + 20, raw.begin() + 20 + static_cast<std::ptrdiff_t>(enc_bytes));
  g.deq.resize(static_cast<std::size_t>(kRows) * kN);
  std::memcpy(g.deq.data(), raw.data() + 20 + enc_bytes, g.deq.size() * 4);
  return g;
}

// Bitwise float equality that accepts any NaN for a NaN (payloads depend on operand order).
inline bool same_float(float a, float b) {
  if (a != a && b != b) return true;
  std::uint32_t ua = 0, ub = 0;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

}  // namespace fucina::quant::test
