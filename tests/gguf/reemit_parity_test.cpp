// Byte-identical re-emit: every GGUF under ../shared/models and ../shared/vocab (written by
// llama.cpp's gguf-py) is read, rebuilt through the Writer from its metadata, tensor infos
// and tensor bytes, and streamed out; the stream must equal the input byte for byte. The
// output is compared chunk by chunk against the mapping, so memory stays bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "support/shared_dir.hpp"

namespace fucina::gguf {
namespace {

std::vector<std::filesystem::path> shared_ggufs(const std::filesystem::path& shared) {
  std::vector<std::filesystem::path> out;
  for (const char* sub : {"models", "vocab"}) {
    if (!std::filesystem::is_directory(shared / sub)) continue;
    for (const auto& e : std::filesystem::directory_iterator(shared / sub))
      if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufReemitParity, EverySharedFileIsByteIdentical) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto files = shared_ggufs(shared);
  if (files.empty()) GTEST_SKIP() << "no .gguf files under " << shared;
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    const Reader r = Reader::open(path);
    const Writer w = Writer::from_reader(r);
    ASSERT_EQ(w.alignment(), r.alignment());
    if (!r.tensors().empty()) {
      ASSERT_EQ(w.header_size(), r.data_offset());
    }
    for (std::size_t i = 0; i < r.tensors().size(); ++i) ASSERT_EQ(w.tensor_offset(i), r.tensors()[i].offset) << i;

    const Bytes in = r.bytes();
    std::uint64_t pos = 0;
    std::uint64_t first_mismatch = ~0ull;
    StreamWriter sw(w, [&](Bytes chunk) {
      const std::uint64_t n = std::min<std::uint64_t>(chunk.size(), pos < in.size() ? in.size() - pos : 0);
      if (first_mismatch == ~0ull) {
        if (std::memcmp(chunk.data(), in.data() + pos, static_cast<std::size_t>(n)) != 0 || n != chunk.size()) {
          for (std::uint64_t i = 0; i < chunk.size(); ++i)
            if (i >= n || chunk[i] != in[static_cast<std::size_t>(pos + i)]) {
              first_mismatch = pos + i;
              break;
            }
        }
      }
      pos += chunk.size();
    });
    for (const TensorInfo& t : r.tensors()) sw.write_tensor(r.tensor_data(t));
    sw.finish();
    EXPECT_EQ(first_mismatch, ~0ull) << "first differing byte at offset " << first_mismatch;
    EXPECT_EQ(pos, in.size()) << "output size differs";
  }
  RecordProperty("files", static_cast<int>(files.size()));
}

}  // namespace
}  // namespace fucina::gguf
