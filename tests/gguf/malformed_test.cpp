// Corrupted GGUFs: every structural violation must throw fucina::Error(InvalidFile) whose
// message names the problem and the byte offset where it sits, and must never read out of
// bounds (run under ASan: see the asan preset).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "sample_file.hpp"

namespace fucina::gguf {
namespace {

using Buf = std::vector<std::byte>;

// The victim: known keys and tensors whose field positions we locate through a Reader.
struct Victim {
  Buf bytes;
  std::vector<std::uint64_t> kv;      // record offsets
  std::vector<std::uint64_t> tensor;  // info record offsets
  std::uint64_t data_offset = 0;
  std::uint64_t data_end = 0;  // end of the last tensor's bytes (before its padding)
};

Victim make_victim() {
  Writer w;
  w.set_alignment(32);
  w.set_u32("t.aa", 1);
  w.set_string("t.bb", "hello");
  const float f[] = {1, 2, 3};
  w.set_array<float>("t.arr", f);
  const std::string_view toks[] = {"a", "bc"};
  w.set_string_array("t.tok", toks);
  const std::vector<std::byte> d1 = test::pattern_bytes(64, 1), d2 = test::pattern_bytes(68, 2);
  const std::int64_t ne1[] = {8, 2}, ne2[] = {32, 2};
  w.add_tensor("w.a", GgmlType::F32, ne1, d1);
  w.add_tensor("w.b", GgmlType::Q8_0, ne2, d2);
  Victim v;
  v.bytes = w.to_bytes();
  const Reader r = Reader::parse(Bytes(v.bytes));
  for (const KeyValue& kv : r.metadata()) v.kv.push_back(kv.offset);
  for (const TensorInfo& t : r.tensors()) v.tensor.push_back(t.info_offset);
  v.data_offset = r.data_offset();
  v.data_end = r.data_offset() + r.tensors()[1].offset + r.tensors()[1].size_bytes;
  return v;
}

template <class T>
void poke(Buf& b, std::uint64_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Field positions inside the victim (keys are 4-5 chars; see make_victim).
std::uint64_t key_len(const Victim& v, std::size_t i) {
  std::uint64_t n;
  std::memcpy(&n, v.bytes.data() + v.kv[i], 8);
  return n;
}
std::uint64_t type_at(const Victim& v, std::size_t i) { return v.kv[i] + 8 + key_len(v, i); }
std::uint64_t payload_at(const Victim& v, std::size_t i) { return type_at(v, i) + 4; }
// Tensor names are 3 chars ("w.a", "w.b"), 2 dims each.
std::uint64_t ndims_at(const Victim& v, std::size_t t) { return v.tensor[t] + 8 + 3; }
std::uint64_t dim_at(const Victim& v, std::size_t t, std::size_t d) { return ndims_at(v, t) + 4 + 8 * d; }
std::uint64_t ttype_at(const Victim& v, std::size_t t) { return dim_at(v, t, 2); }
std::uint64_t toffset_at(const Victim& v, std::size_t t) { return ttype_at(v, t) + 4; }

struct Corruption {
  const char* name;
  std::function<void(Buf&, const Victim&)> apply;
  const char* expect_text;
  std::function<std::uint64_t(const Victim&)> expect_offset;
};

std::vector<Corruption> corruptions() {
  constexpr std::uint64_t giant = 1ull << 62;
  return {
      {"flipped magic", [](Buf& b, const Victim&) { b[1] = std::byte{'X'}; }, "bad magic",
       [](const Victim&) { return 0ull; }},
      {"version 0", [](Buf& b, const Victim&) { poke<std::uint32_t>(b, 4, 0); }, "version",
       [](const Victim&) { return 4ull; }},
      {"version 1", [](Buf& b, const Victim&) { poke<std::uint32_t>(b, 4, 1); }, "v1 is obsolete",
       [](const Victim&) { return 4ull; }},
      {"version 4", [](Buf& b, const Victim&) { poke<std::uint32_t>(b, 4, 4); }, "unsupported version 4",
       [](const Victim&) { return 4ull; }},
      {"big-endian version", [](Buf& b, const Victim&) { poke<std::uint32_t>(b, 4, 0x03000000); }, "byte-swapped",
       [](const Victim&) { return 4ull; }},
      {"giant tensor count", [](Buf& b, const Victim&) { poke<std::uint64_t>(b, 8, ~0ull); }, "tensor count",
       [](const Victim&) { return 8ull; }},
      {"giant kv count", [](Buf& b, const Victim&) { poke<std::uint64_t>(b, 16, giant); }, "metadata count",
       [](const Victim&) { return 16ull; }},
      {"giant key length", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, v.kv[1], giant); },
       "metadata key needs", [](const Victim& v) { return v.kv[1] + 8; }},
      {"empty key", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, v.kv[1], 0); }, "is empty",
       [](const Victim& v) { return v.kv[1]; }},
      {"duplicate key", [](Buf& b, const Victim& v) { std::memcpy(b.data() + v.kv[2] + 8, "t.aa", 4); },
       "duplicate metadata key 't.aa'", [](const Victim& v) { return v.kv[2]; }},
      {"unknown value type", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, type_at(v, 1), 13); },
       "unknown value type 13", [](const Victim& v) { return type_at(v, 1); }},
      {"giant string length", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, payload_at(v, 2), giant); },
       "truncated string", [](const Victim& v) { return payload_at(v, 2) + 8; }},
      {"unknown array element type",
       [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, payload_at(v, 3), 77); }, "unknown array element type 77",
       [](const Victim& v) { return payload_at(v, 3); }},
      {"giant f32 array count", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, payload_at(v, 3) + 4, giant); },
       "array element count", [](const Victim& v) { return payload_at(v, 3) + 12; }},
      {"giant string array count",
       [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, payload_at(v, 4) + 4, ~0ull); },
       "string array element count", [](const Victim& v) { return payload_at(v, 4) + 12; }},
      {"alignment not a power of two", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, payload_at(v, 0), 48); },
       "not a power of two", [](const Victim& v) { return v.kv[0]; }},
      {"alignment zero", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, payload_at(v, 0), 0); },
       "not a power of two", [](const Victim& v) { return v.kv[0]; }},
      {"alignment not u32", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, type_at(v, 0), 5); },
       "expected u32", [](const Victim& v) { return v.kv[0]; }},
      {"duplicate tensor name", [](Buf& b, const Victim& v) { b[v.tensor[1] + 8 + 2] = std::byte{'a'}; },
       "duplicate tensor name 'w.a'", [](const Victim& v) { return v.tensor[1]; }},
      {"too many dims", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, ndims_at(v, 0), 5); }, "has 5 dims",
       [](const Victim& v) { return ndims_at(v, 0); }},
      {"giant n_dims", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, ndims_at(v, 0), ~0u); }, "dims (max 4)",
       [](const Victim& v) { return ndims_at(v, 0); }},
      {"negative dim", [](Buf& b, const Victim& v) { poke<std::int64_t>(b, dim_at(v, 0, 1), -2); }, "is negative",
       [](const Victim& v) { return dim_at(v, 0, 1); }},
      {"dims product overflow",
       [](Buf& b, const Victim& v) {
         poke<std::int64_t>(b, dim_at(v, 0, 0), 1ll << 40);
         poke<std::int64_t>(b, dim_at(v, 0, 1), 1ll << 40);
       },
       "element count overflows", [](const Victim& v) { return dim_at(v, 0, 1); }},
      {"byte size overflow",
       [](Buf& b, const Victim& v) {
         poke<std::int64_t>(b, dim_at(v, 0, 0), 1ll << 62);
         poke<std::int64_t>(b, dim_at(v, 0, 1), 1);
       },
       "byte size overflows", [](const Victim& v) { return ndims_at(v, 0); }},
      {"removed tensor type", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, ttype_at(v, 0), 4); },
       "unknown ggml type 4", [](const Victim& v) { return ttype_at(v, 0); }},
      {"unknown tensor type", [](Buf& b, const Victim& v) { poke<std::uint32_t>(b, ttype_at(v, 1), 1000); },
       "unknown ggml type 1000", [](const Victim& v) { return ttype_at(v, 1); }},
      {"row not a block multiple", [](Buf& b, const Victim& v) { poke<std::int64_t>(b, dim_at(v, 1, 0), 33); },
       "not a multiple of the q8_0 block size 32", [](const Victim& v) { return ndims_at(v, 1); }},
      {"offset past end", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, toffset_at(v, 1), 1ull << 40); },
       "runs past the end", [](const Victim& v) { return toffset_at(v, 1); }},
      {"offset near u64 max", [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, toffset_at(v, 1), ~0ull - 31); },
       "runs past the end", [](const Victim& v) { return toffset_at(v, 1); }},
      {"misaligned offset",
       [](Buf& b, const Victim& v) { poke<std::uint64_t>(b, toffset_at(v, 1), 64 + 4); },
       "misaligned", [](const Victim& v) { return toffset_at(v, 1); }},
      {"truncated data section", [](Buf& b, const Victim& v) { b.resize(v.data_end - 1); }, "runs past the end",
       [](const Victim& v) { return toffset_at(v, 1); }},
  };
}

TEST(GgufMalformed, VictimIsValid) {
  const Victim v = make_victim();
  EXPECT_NO_THROW((void)Reader::parse(Bytes(v.bytes)));
  EXPECT_EQ(v.kv.size(), 5u);
  EXPECT_EQ(v.tensor.size(), 2u);
}

TEST(GgufMalformed, EachCorruptionNamesProblemAndOffset) {
  const Victim v = make_victim();
  for (const Corruption& c : corruptions()) {
    Buf b = v.bytes;
    c.apply(b, v);
    try {
      (void)Reader::parse(Bytes(b));
      ADD_FAILURE() << c.name << ": parsed without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::InvalidFile) << c.name;
      EXPECT_NE(msg.find(c.expect_text), std::string::npos) << c.name << ": " << msg;
      const std::string off = fmt::format("byte offset {}", c.expect_offset(v));
      EXPECT_NE(msg.find(off), std::string::npos) << c.name << ": wanted '" << off << "' in: " << msg;
    }
  }
}

TEST(GgufMalformed, TruncationAtEveryHeaderAndDataByte) {
  const Victim v = make_victim();
  // Any cut before the last tensor's final byte fails; cuts inside its trailing padding are
  // still a complete file.
  for (std::uint64_t n = 0; n < v.data_end; ++n) {
    const Bytes cut = Bytes(v.bytes).first(static_cast<std::size_t>(n));
    try {
      (void)Reader::parse(cut);
      ADD_FAILURE() << "cut at " << n << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidFile) << n;
      EXPECT_NE(std::string(e.what()).find("byte offset"), std::string::npos) << n << ": " << e.what();
    }
  }
  for (std::uint64_t n = v.data_end; n <= v.bytes.size(); ++n)
    EXPECT_NO_THROW((void)Reader::parse(Bytes(v.bytes).first(static_cast<std::size_t>(n)))) << n;
}

// A deterministic mini-fuzz over the header region: every mutant parses or throws Error.
TEST(GgufMalformed, RandomHeaderMutationsNeverCrash) {
  const Victim v = make_victim();
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Buf b = v.bytes;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits; ++e) {
      const auto at = static_cast<std::size_t>(next() % v.data_offset);
      b[at] = static_cast<std::byte>(next() & 0xFF);
    }
    try {
      const Reader r = Reader::parse(Bytes(b));
      for (const KeyValue& kv : r.metadata()) (void)format_value(kv.value);
      for (const TensorInfo& t : r.tensors()) (void)r.tensor_data(t);
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(parsed + rejected, 3000);
}

TEST(GgufMalformed, DeepNestingIsRejected) {
  OwnedValue v = OwnedValue::scalar<std::uint8_t>(1);
  v = OwnedValue::array_of(ValueType::Uint8, std::span(&v, 1));
  for (std::uint32_t depth = 1; depth < max_array_depth + 1; ++depth)
    v = OwnedValue::array_of(ValueType::Array, std::span(&v, 1));
  Writer w;
  w.set("deep", v);
  try {
    (void)Reader::parse(w.to_bytes());
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
  }
  // One level less is fine.
  OwnedValue ok = OwnedValue::scalar<std::uint8_t>(1);
  ok = OwnedValue::array_of(ValueType::Uint8, std::span(&ok, 1));
  for (std::uint32_t depth = 1; depth < max_array_depth; ++depth)
    ok = OwnedValue::array_of(ValueType::Array, std::span(&ok, 1));
  Writer w2;
  w2.set("deep", ok);
  EXPECT_NO_THROW((void)Reader::parse(w2.to_bytes()));
}

TEST(GgufMalformed, MissingFileIsIoError) {
  try {
    (void)Reader::open("/nonexistent/dir/model.gguf");
    FAIL() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
  }
  EXPECT_THROW((void)Reader::open("/"), Error);
}

}  // namespace
}  // namespace fucina::gguf
