// fucina quantize vs llama-quantize on the shared tiny models (../shared/models): every
// TYPE and flag variant in goldens.json must hash to llama-quantize's output. These models
// have 64-wide rows, so most tensors take llama.cpp's fallback types; the MoE model covers
// the 8-expert rules and 3-D expert tensors. Skips when ../shared is absent.
#include <gtest/gtest.h>

#include "fucina/gguf/reader.hpp"
#include "quantize/golden_support.hpp"

namespace fucina::quant {
namespace {

TEST(QuantizeSharedModels, MatchLlamaQuantizeByteForByte) {
  FUCINA_REQUIRE_SHARED(shared);
  int checked = 0;
  for (const auto& m : test::load_quantize_goldens()) {
    if (m.source != "shared") continue;
    const auto path = shared / "models" / (m.name + ".gguf");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const auto r = gguf::Reader::open(path);
    ASSERT_EQ(test::sha256_hex(r.bytes()), m.input_sha256) << path << " changed since the goldens were made";
    for (const auto& o : m.outputs) {
      EXPECT_EQ(test::quantized_sha256(r, test::golden_options(o, 2)), o.sha256) << m.name << " " << o.type << " " << o.flags;
      ++checked;
    }
  }
  EXPECT_GE(checked, 75);
}

}  // namespace
}  // namespace fucina::quant
