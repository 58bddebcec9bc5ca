// The band table of docs/ARCHITECTURE.md holds for include/fucina and src (see band_check.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "architecture/band_check.hpp"

namespace fucina::test::bands {
namespace {

const std::filesystem::path kRoot = FUCINA_SOURCE_DIR;

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

Table doc_table() { return parse_table(read_text(kRoot / "docs/ARCHITECTURE.md")); }

TEST(Bands, TreeIncludesOnlyItsOwnRowAndLowerBands) {
  const auto bad = check_layering(doc_table(), load_tree(kRoot));
  EXPECT_TRUE(bad.empty()) << bad.size() << " layering violations:\n" << lines(bad);
}

TEST(Bands, DocMapsOnlyWhatExists) {
  const auto bad = check_entries_exist(doc_table(), load_tree(kRoot));
  EXPECT_TRUE(bad.empty()) << lines(bad);
}

TEST(Bands, OnlyArchHeaderReadsIsaMacros) {
  const auto bad = check_arch_macros(load_tree(kRoot));
  EXPECT_TRUE(bad.empty()) << lines(bad);
}

// The table as the doc states it: the facade above autograd, quant above gguf, the
// generation loop above the models, training and the server on top.
TEST(Bands, DocTableShape) {
  const Table t = doc_table();
  auto band = [&](const char* p) {
    const Entry* e = t.find(p);
    return e ? e->band : -1;
  };
  EXPECT_EQ(band("core/error.hpp"), 0);
  EXPECT_LT(band("gguf/format.hpp"), band("quant/traits.hpp"));
  EXPECT_LT(band("kernels/arch.hpp"), band("quant/traits.hpp"));
  EXPECT_LT(band("autograd/node.hpp"), band("core/tensor.hpp"));
  EXPECT_EQ(band("core/ops/checkpoint.hpp"), band("core/tensor.hpp"));
  EXPECT_LT(band("data/spirals.hpp"), band("es/train.hpp"));
  EXPECT_GT(band("generate/loop.hpp"), band("model/model.hpp"));
  EXPECT_EQ(band("train/finetune.hpp"), t.top_band());
  EXPECT_EQ(band("serve/server.hpp"), t.top_band());
  EXPECT_GT(band("train/finetune.hpp"), band("generate/loop.hpp"));
  EXPECT_GT(band("serve/server.hpp"), band("generate/loop.hpp"));
}

// The checker itself, on a made-up table and tree.
const char* kToyDoc = R"(# Toy
Some text | with a bar.

| band | folder | what lives there |
| --- | --- | --- |
| 0 | `core/` | base |
| 1 | `gguf/` | a sibling |
| 1 | `kernels/` | another |
| 2 | `core/raw/`, `core/tensor.hpp` | raw kernels |
| 3 (planned) | `generate/` | not there yet |

After the table.
)";

TEST(BandCheck, ParsesRowsFilesAndPlanned) {
  const Table t = parse_table(kToyDoc);
  ASSERT_EQ(t.entries.size(), 6u);
  EXPECT_EQ(t.find("core/raw/x.cpp")->path, "core/raw/");  // most specific row wins
  EXPECT_EQ(t.find("core/tensor.hpp")->band, 2);
  EXPECT_EQ(t.find("core/context.hpp")->band, 0);
  EXPECT_TRUE(t.find("generate/loop.hpp")->planned);
  EXPECT_EQ(t.find("model/x.hpp"), nullptr);
  EXPECT_EQ(t.top_band(), 3);
}

TEST(BandCheck, RejectsBadTables) {
  EXPECT_THROW(parse_table("no table here\n"), std::runtime_error);
  EXPECT_THROW(parse_table("| band | folder |\n| --- | --- |\n| x | `core/` |\n"), std::runtime_error);
  EXPECT_THROW(parse_table("| band | folder |\n| --- | --- |\n| 1 | core |\n"), std::runtime_error);
}

TEST(BandCheck, NamesFileLineAndIncludeOfAHigherBand) {
  const Table t = parse_table(kToyDoc);
  const std::vector<SourceFile> files = {
      {"include/fucina/core/buffer.hpp", "core/buffer.hpp", "#pragma once\n#include \"fucina/core/raw/strided.hpp\"\n"},
      {"src/core/raw/a.cpp", "core/raw/a.cpp", "#include \"fucina/core/error.hpp\"\n#include \"fucina/gguf/format.hpp\"\n"},
      {"include/fucina/gguf/reader.hpp", "gguf/reader.hpp", "  #include \"fucina/kernels/arch.hpp\"\n"},
      {"include/fucina/gguf/writer.hpp", "gguf/writer.hpp", "#include \"fucina/gguf/format.hpp\"\n#include <vector>\n"},
      {"include/fucina/model/m.hpp", "model/m.hpp", "\n"},
      // core/tensor.hpp and core/raw/ share a row: one layer.
      {"include/fucina/core/tensor.hpp", "core/tensor.hpp", "#include \"fucina/core/raw/strided.hpp\"\n"},
  };
  const auto bad = check_layering(t, files);
  ASSERT_EQ(bad.size(), 3u) << lines(bad);
  // core (0) -> core/raw (2): higher band.
  EXPECT_EQ(bad[0].rfind("include/fucina/core/buffer.hpp:2: includes fucina/core/raw/strided.hpp of band 2", 0), 0u) << bad[0];
  // gguf (1) -> kernels (1): a sibling row of the same band.
  EXPECT_NE(bad[1].find("include/fucina/gguf/reader.hpp:1: includes fucina/kernels/arch.hpp"), std::string::npos) << bad[1];
  // model/ is in no row.
  EXPECT_NE(bad[2].find("include/fucina/model/m.hpp: not in the band table"), std::string::npos) << bad[2];
}

TEST(BandCheck, FlagsRowsThatNameNothing) {
  const Table t = parse_table(kToyDoc);
  const std::vector<SourceFile> files = {{"src/core/a.cpp", "core/a.cpp", ""}, {"src/core/raw/b.cpp", "core/raw/b.cpp", ""}};
  const auto bad = check_entries_exist(t, files);  // gguf/, kernels/, core/tensor.hpp; generate/ is planned
  ASSERT_EQ(bad.size(), 3u) << lines(bad);
  EXPECT_NE(bad[0].find("gguf/"), std::string::npos);
  EXPECT_NE(bad[2].find("core/tensor.hpp"), std::string::npos);
}

TEST(BandCheck, FlagsIsaMacrosOutsideArchHeader) {
  const std::vector<SourceFile> files = {
      {"include/fucina/kernels/arch.hpp", "kernels/arch.hpp", "#if defined(__AVX2__)\n#endif\n"},
      {"src/quant/a.cpp", "quant/a.cpp", "#include <x>\n#if !defined(FUCINA_SCALAR) && defined(__AVX512F__)\n#endif\n"},
      {"src/quant/b.cpp", "quant/b.cpp", "#if FUCINA_ARCH_AVX2\n#endif\n"},
      {"src/quant/c.cpp", "quant/c.cpp", "#include \"fucina/kernels/arch.hpp\"\n#if FUCINA_ARCH_AVX2\n#endif\n"},
  };
  const auto bad = check_arch_macros(files);
  ASSERT_EQ(bad.size(), 3u) << lines(bad);
  EXPECT_EQ(bad[0].rfind("src/quant/a.cpp:2: tests __AVX512F__;", 0), 0u) << bad[0];
  EXPECT_EQ(bad[1].rfind("src/quant/a.cpp:2: tests FUCINA_SCALAR;", 0), 0u) << bad[1];
  EXPECT_NE(bad[2].find("src/quant/b.cpp:1: tests FUCINA_ARCH_* without including"), std::string::npos) << bad[2];
}

}  // namespace
}  // namespace fucina::test::bands
