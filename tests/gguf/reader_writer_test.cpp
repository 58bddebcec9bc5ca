// Reader/Writer round trips on files the Writer generates, plus a hand-assembled file that
// pins the wire layout independently of our writer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "sample_file.hpp"

namespace fucina::gguf {
namespace {

using test::SampleFile;

bool same_bytes(Bytes a, Bytes b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

class RoundTrip : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(RoundTrip, EveryValueTypeAndTensor) {
  const std::uint32_t align = GetParam();
  SampleFile s;
  test::fill_sample(s, align);
  const std::vector<std::byte> bytes = s.writer.to_bytes();
  const std::uint32_t expect_align = align ? align : 32;
  EXPECT_EQ(bytes.size(), s.writer.total_size());
  EXPECT_EQ(bytes.size() % expect_align, 0u);

  const Reader r = Reader::parse(Bytes(bytes));
  EXPECT_EQ(r.version(), 3u);
  EXPECT_EQ(r.alignment(), expect_align);
  EXPECT_EQ(r.data_offset() % expect_align, 0u);
  EXPECT_EQ(r.data_offset(), s.writer.header_size());

  // File order is insertion order.
  std::vector<std::string_view> keys;
  for (const KeyValue& kv : r.metadata()) keys.push_back(kv.key);
  ASSERT_EQ(keys.size(), s.writer.n_kv());
  EXPECT_EQ(keys.front(), "general.architecture");
  EXPECT_EQ(keys.back(), "t.nested");

  EXPECT_EQ(r.get_string("general.architecture"), "llama");
  EXPECT_EQ(r.get_u8("t.u8"), 200);
  EXPECT_EQ(r.get_i8("t.i8"), -100);
  EXPECT_EQ(r.get_u16("t.u16"), 60000);
  EXPECT_EQ(r.get_i16("t.i16"), -30000);
  EXPECT_EQ(r.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(r.get_i32("t.i32"), -2000000000);
  EXPECT_EQ(r.get_f32("t.f32"), 0.5f);
  EXPECT_TRUE(r.get_bool("t.bool"));
  EXPECT_EQ(r.get_string("t.str"), "hello \xe2\x96\x81world");
  EXPECT_EQ(r.get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(r.get_i64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(r.get_f64("t.f64"), -1.25);
  EXPECT_EQ(r.get_array<float>("tokenizer.ggml.scores"), (std::vector<float>{0.f, -1.5f, 2.25f}));
  EXPECT_EQ(r.get_array<std::int32_t>("tokenizer.ggml.token_type"), (std::vector<std::int32_t>{1, 2, 3, 6}));
  EXPECT_EQ(r.get_int_array("tokenizer.ggml.token_type"), (std::vector<std::int64_t>{1, 2, 3, 6}));
  EXPECT_EQ(r.get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string_view>{"<s>", "", "\xe2\x96\x81the"}));

  auto it = r.get_array_view("tokenizer.ggml.tokens").begin();  // outlives its ArrayView
  EXPECT_EQ((*it).as_string(), "<s>");
  EXPECT_EQ((*++it).as_string(), "");

  const ArrayView nested = r.get_array_view("t.nested");
  EXPECT_EQ(nested.element_type(), ValueType::Array);
  ASSERT_EQ(nested.size(), 2u);
  std::vector<std::vector<std::uint16_t>> got;
  for (const Value& v : nested) got.push_back(v.as_array().to_vector<std::uint16_t>());
  EXPECT_EQ(got, (std::vector<std::vector<std::uint16_t>>{{1, 2}, {3}}));

  ASSERT_EQ(r.tensors().size(), 3u);
  const TensorInfo& t0 = r.tensors()[0];
  EXPECT_EQ(t0.name, "tok_embd.weight");
  EXPECT_EQ(t0.type, GgmlType::F32);
  EXPECT_EQ(t0.n_dims, 2u);
  EXPECT_EQ(t0.ne[0], 5);
  EXPECT_EQ(t0.ne[1], 3);
  EXPECT_EQ(t0.n_elements(), 15);
  EXPECT_EQ(t0.offset, 0u);
  const TensorInfo& t1 = r.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(t1.type, GgmlType::Q8_0);
  EXPECT_EQ(t1.size_bytes, 68u);
  EXPECT_EQ(t1.offset, (60 + expect_align - 1) / expect_align * expect_align);  // 60 f32 bytes, padded
  const TensorInfo& t2 = r.tensor("output_norm.weight");
  EXPECT_EQ(t2.n_dims, 3u);  // trailing 1s are kept as written
  EXPECT_EQ(t2.offset % expect_align, 0u);
  EXPECT_TRUE(same_bytes(r.tensor_data(t0), s.f32_data));
  EXPECT_TRUE(same_bytes(r.tensor_data(t1), s.q8_data));
  EXPECT_TRUE(same_bytes(r.tensor_data(t2), s.f16_data));
  EXPECT_EQ(r.find_tensor("nope"), nullptr);
  EXPECT_EQ(r.find("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Alignments, RoundTrip, ::testing::Values(0u, 32u, 64u, 1u, 256u));

// A file assembled by hand from the spec: one u32 key and one 2-element f32 tensor.
TEST(GgufLayout, MatchesHandAssembledFile) {
  std::vector<std::uint8_t> want = {'G', 'G', 'U', 'F', 3, 0, 0, 0,  // magic, version
                                    1, 0, 0, 0, 0, 0, 0, 0,          // n_tensors
                                    1, 0, 0, 0, 0, 0, 0, 0,          // n_kv
                                    3, 0, 0, 0, 0, 0, 0, 0, 'a', '.', 'b',  // key
                                    4, 0, 0, 0, 7, 0, 0, 0,                // u32 = 7
                                    1, 0, 0, 0, 0, 0, 0, 0, 'w',           // tensor name
                                    1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,    // n_dims=1, ne0=2
                                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};   // f32, offset 0
  ASSERT_EQ(want.size(), 76u);
  want.resize(96, 0);  // pad to 32
  const float data[2] = {1.0f, -2.0f};
  const auto* db = reinterpret_cast<const std::uint8_t*>(data);
  want.insert(want.end(), db, db + 8);
  want.resize(128, 0);  // the last tensor is padded too

  Writer w;
  w.set_u32("a.b", 7);
  const std::int64_t ne[] = {2};
  w.add_tensor("w", GgmlType::F32, ne, std::as_bytes(std::span(data)));
  const std::vector<std::byte> got = w.to_bytes();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);

  const Reader r = Reader::parse(std::as_bytes(std::span(want)));
  EXPECT_EQ(r.get_u32("a.b"), 7u);
  EXPECT_EQ(r.data_offset(), 96u);
  EXPECT_TRUE(same_bytes(r.tensor_data(r.tensors()[0]), std::as_bytes(std::span(data))));
}

TEST(GgufWriter, StreamingInChunksMatchesInMemory) {
  SampleFile s;
  test::fill_sample(s, 64);
  const std::vector<std::byte> whole = s.writer.to_bytes();

  std::vector<std::byte> streamed;
  StreamWriter sw(s.writer, [&](Bytes b) { streamed.insert(streamed.end(), b.begin(), b.end()); });
  for (const auto& data : {&s.f32_data, &s.q8_data, &s.f16_data})
    for (std::size_t i = 0; i < data->size(); i += 7)
      sw.write(Bytes(*data).subspan(i, std::min<std::size_t>(7, data->size() - i)));
  sw.finish();
  EXPECT_EQ(streamed, whole);
}

TEST(GgufWriter, FileOutputReadsBackThroughMmap) {
  SampleFile s;
  test::fill_sample(s);
  const auto path = std::filesystem::temp_directory_path() / fmt::format("fucina_gguf_{}.gguf", ::getpid());
  s.writer.write_file(path);
  {
    const Reader r = Reader::open(path);
    const std::vector<std::byte> whole = s.writer.to_bytes();
    EXPECT_TRUE(same_bytes(r.bytes(), whole));
    EXPECT_TRUE(same_bytes(r.tensor_data(r.tensor("tok_embd.weight")), s.f32_data));
  }
  std::filesystem::remove(path);
}

TEST(GgufWriter, StreamMisuseThrows) {
  SampleFile s;
  test::fill_sample(s);
  std::vector<std::byte> sink;
  StreamWriter sw(s.writer, [&](Bytes b) { sink.insert(sink.end(), b.begin(), b.end()); });
  EXPECT_THROW(sw.write_tensor(s.q8_data), Error);  // wrong size for tensor 0
  sw.write(Bytes(s.f32_data).first(10));
  EXPECT_THROW(sw.write(s.f32_data), Error);  // runs past tensor 0
  EXPECT_THROW(sw.finish(), Error);           // incomplete
}

TEST(GgufWriter, ValidatesItsInput) {
  Writer w;
  const std::int64_t ne[] = {33};
  EXPECT_THROW(w.add_tensor("q", GgmlType::Q4_0, ne), Error);  // 33 % 32 != 0
  const std::int64_t ok[] = {32};
  w.add_tensor("q", GgmlType::Q4_0, ok);
  EXPECT_THROW(w.add_tensor("q", GgmlType::Q4_0, ok), Error);  // duplicate
  const std::vector<std::byte> small(3);
  EXPECT_THROW(w.add_tensor("r", GgmlType::Q4_0, ok, small), Error);  // 18 bytes needed
  EXPECT_THROW(w.set_alignment(48), Error);
  EXPECT_THROW(w.set_i32(alignment_key, 64), Error);
  EXPECT_THROW(w.set_u32("", 1), Error);
  EXPECT_THROW(w.set_version(1), Error);
  EXPECT_THROW((void)w.to_bytes(), Error);  // tensor q has no data
}

TEST(GgufWriter, SetKeepsPositionAndEraseRemoves) {
  Writer w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "x");
  w.set_alignment(64);
  EXPECT_EQ(w.alignment(), 64u);
  EXPECT_TRUE(w.erase("general.alignment"));
  EXPECT_EQ(w.alignment(), 32u);
  EXPECT_FALSE(w.erase("zzz"));
  const Reader r = Reader::parse(w.to_bytes());
  ASSERT_EQ(r.metadata().size(), 2u);
  EXPECT_EQ(r.metadata()[0].key, "a");
  EXPECT_EQ(r.get_string("a"), "x");
  EXPECT_EQ(r.metadata()[1].key, "b");
}

TEST(GgufWriter, Version2EmptyAndZeroSizeTensors) {
  Writer w;
  w.set_version(2);
  const std::int64_t ne0[] = {4, 0};
  w.add_tensor("empty", GgmlType::F32, ne0);
  w.add_tensor("scalar", GgmlType::F32, std::span<const std::int64_t>{}, std::as_bytes(std::span("abcd", 4)));
  const Reader r = Reader::parse(w.to_bytes());
  EXPECT_EQ(r.version(), 2u);
  EXPECT_EQ(r.tensor("empty").size_bytes, 0u);
  EXPECT_EQ(r.tensor("scalar").n_dims, 0u);
  EXPECT_EQ(r.tensor("scalar").offset, 0u);  // the empty tensor takes no room
  EXPECT_EQ(r.tensor("scalar").size_bytes, 4u);

  const Reader empty = Reader::parse(Writer().to_bytes());
  EXPECT_TRUE(empty.metadata().empty());
  EXPECT_TRUE(empty.tensors().empty());
  EXPECT_EQ(empty.bytes().size(), 32u);  // 24-byte header padded like ggml does
}

TEST(GgufReader, GetterErrorsNameKeyAndTypes) {
  SampleFile s;
  test::fill_sample(s);
  const Reader r = Reader::parse(s.writer.to_bytes());
  try {
    (void)r.get_u32("t.f32");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidFile);
    EXPECT_NE(std::string(e.what()).find("'t.f32' has type f32, expected u32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte offset"), std::string::npos) << e.what();
  }
  try {
    (void)r.get_string("no.such.key");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing metadata key 'no.such.key'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)r.get_array<std::uint32_t>("tokenizer.ggml.scores"), Error);
  EXPECT_THROW((void)r.get_string_array("tokenizer.ggml.scores"), Error);
  EXPECT_THROW((void)r.get_array_view("t.u8"), Error);
  EXPECT_THROW((void)r.tensor("nope"), Error);
  // Integer getter widens any integer type.
  EXPECT_EQ(r.get_int("t.u8"), 200);
  EXPECT_EQ(r.get_int("t.i16"), -30000);
  EXPECT_EQ(r.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(r.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_THROW((void)r.get_int("t.u64"), Error);  // > INT64_MAX
  EXPECT_THROW((void)r.get_int("t.f32"), Error);
  EXPECT_EQ(r.get_number("t.f32"), 0.5);
  EXPECT_EQ(r.get_number("t.i8"), -100.0);
  EXPECT_THROW((void)r.get_number("t.str"), Error);
}

TEST(GgufValue, FormatAbbreviatesArraysAndStrings) {
  std::vector<std::int32_t> many(100);
  for (int i = 0; i < 100; ++i) many[static_cast<std::size_t>(i)] = i;
  const OwnedValue a = OwnedValue::array<std::int32_t>(many);
  EXPECT_EQ(format_value(a.view(), 3), "[0, 1, 2, ... (100 items)]");
  const OwnedValue s = OwnedValue::string(std::string(100, 'x') + "\n");
  EXPECT_EQ(format_value(s.view(), 3, 5), "\"xxxxx\"... (101 bytes)");
  EXPECT_EQ(format_value(OwnedValue::string("a\"b\n").view()), "\"a\\\"b\\n\"");
  EXPECT_EQ(format_value(OwnedValue::scalar(true).view()), "true");
  EXPECT_EQ(format_value(OwnedValue::scalar(-7).view()), "-7");
  const std::vector<std::string_view> toks = {"a", "b"};
  EXPECT_EQ(format_value(OwnedValue::string_array(toks).view()), "[\"a\", \"b\"]");
}

}  // namespace
}  // namespace fucina::gguf
