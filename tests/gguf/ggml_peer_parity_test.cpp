// Against ggml itself, dlopen'ing the peer build's libggml-base.so (../shared/peers/
// llama-cpp.sh): the type table (name, block size, type size, quantized) for every id, and
// ggml's own gguf parser accepting what our Writer produces with the same layout. Skips when
// the peer library is absent (CI without peers).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "fucina/gguf/format.hpp"
#include "fucina/gguf/writer.hpp"
#include "sample_file.hpp"

namespace fucina::gguf {
namespace {

std::filesystem::path peer_lib() {
  if (const char* dir = std::getenv("FUCINA_PEERS_BIN")) return std::filesystem::path(dir) / "libggml-base.so";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache/fucina-peers/llama.cpp/build/bin/libggml-base.so";
}

void* open_peer() {
  const auto lib = peer_lib();
  return std::filesystem::exists(lib) ? ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
}

#define FUCINA_REQUIRE_PEER(h) \
  void* h = open_peer();       \
  if (!h) GTEST_SKIP() << "llama.cpp peer build not found at " << peer_lib() << " (run ../shared/peers/llama-cpp.sh)"

TEST(GgufTypeTableParity, MatchesLibggml) {
  FUCINA_REQUIRE_PEER(h);
  using SizeFn = std::size_t (*)(int);
  using BlckFn = std::int64_t (*)(int);
  using NameFn = const char* (*)(int);
  using QuantFn = bool (*)(int);
  auto type_size_fn = reinterpret_cast<SizeFn>(::dlsym(h, "ggml_type_size"));
  auto blck_fn = reinterpret_cast<BlckFn>(::dlsym(h, "ggml_blck_size"));
  auto name_fn = reinterpret_cast<NameFn>(::dlsym(h, "ggml_type_name"));
  auto quant_fn = reinterpret_cast<QuantFn>(::dlsym(h, "ggml_is_quantized"));
  ASSERT_TRUE(type_size_fn && blck_fn && name_fn && quant_fn);
  int checked = 0;
  for (std::uint32_t id = 0; id < ggml_type_count; ++id) {
    SCOPED_TRACE(id);
    const int i = static_cast<int>(id);
    if (!is_valid_ggml_type(id)) {
      EXPECT_EQ(blck_fn(i), 0) << "ggml knows id " << id << " (" << name_fn(i) << ") but we reject it";
      continue;
    }
    const TypeTraits& t = ggml_type_table[id];
    EXPECT_EQ(std::string(name_fn(i)), std::string(t.name));
    EXPECT_EQ(blck_fn(i), static_cast<std::int64_t>(t.block_size));
    EXPECT_EQ(type_size_fn(i), t.type_size);
    EXPECT_EQ(quant_fn(i), t.quantized);
    ++checked;
  }
  EXPECT_EQ(checked, 35);
  ::dlclose(h);
}

// ggml's gguf_init_params layout: {bool no_alloc; ggml_context** ctx;}.
struct PeerInitParams {
  bool no_alloc;
  void** ctx;
};

TEST(GgufWriterParity, GgmlParsesOurFilesWithTheSameLayout) {
  FUCINA_REQUIRE_PEER(h);
  using InitFn = void* (*)(const void*, std::size_t, PeerInitParams);
  using FreeFn = void (*)(void*);
  using CountFn = std::int64_t (*)(const void*);
  using SizeFn = std::size_t (*)(const void*);
  using KeyFn = const char* (*)(const void*, std::int64_t);
  using OffFn = std::size_t (*)(const void*, std::int64_t);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "gguf_init_from_buffer"));
  auto free_ctx = reinterpret_cast<FreeFn>(::dlsym(h, "gguf_free"));
  auto n_kv = reinterpret_cast<CountFn>(::dlsym(h, "gguf_get_n_kv"));
  auto n_tensors = reinterpret_cast<CountFn>(::dlsym(h, "gguf_get_n_tensors"));
  auto alignment = reinterpret_cast<SizeFn>(::dlsym(h, "gguf_get_alignment"));
  auto data_offset = reinterpret_cast<SizeFn>(::dlsym(h, "gguf_get_data_offset"));
  auto key = reinterpret_cast<KeyFn>(::dlsym(h, "gguf_get_key"));
  auto tensor_name = reinterpret_cast<KeyFn>(::dlsym(h, "gguf_get_tensor_name"));
  auto tensor_offset = reinterpret_cast<OffFn>(::dlsym(h, "gguf_get_tensor_offset"));
  ASSERT_TRUE(init && free_ctx && n_kv && n_tensors && alignment && data_offset && key && tensor_name &&
              tensor_offset);
  for (std::uint32_t align : {0u, 64u, 128u}) {
    for (std::uint32_t version : {2u, 3u}) {
      SCOPED_TRACE(fmt::format("alignment {} version {}", align, version));
      test::SampleFile s;
      test::fill_sample(s, align, /*nested=*/false);
      s.writer.set_version(version);
      const std::vector<std::byte> bytes = s.writer.to_bytes();
      void* ctx = init(bytes.data(), bytes.size(), PeerInitParams{true, nullptr});
      ASSERT_NE(ctx, nullptr) << "ggml rejected our file";
      const Reader r = Reader::parse(Bytes(bytes));
      EXPECT_EQ(n_kv(ctx), static_cast<std::int64_t>(r.metadata().size()));
      EXPECT_EQ(alignment(ctx), r.alignment());
      EXPECT_EQ(data_offset(ctx), r.data_offset());
      for (std::size_t i = 0; i < r.metadata().size(); ++i)
        EXPECT_EQ(std::string_view(key(ctx, static_cast<std::int64_t>(i))), r.metadata()[i].key);
      ASSERT_EQ(n_tensors(ctx), static_cast<std::int64_t>(r.tensors().size()));
      for (std::size_t i = 0; i < r.tensors().size(); ++i) {
        EXPECT_EQ(std::string_view(tensor_name(ctx, static_cast<std::int64_t>(i))), r.tensors()[i].name);
        EXPECT_EQ(tensor_offset(ctx, static_cast<std::int64_t>(i)), r.tensors()[i].offset);
      }
      free_ctx(ctx);
    }
  }
  for (bool pad : {true, false}) {
    Writer w;
    w.set_pad_tensorless(pad);
    w.set_string("general.name", "x");
    const std::vector<std::byte> bytes = w.to_bytes();
    void* ctx = init(bytes.data(), bytes.size(), PeerInitParams{true, nullptr});
    EXPECT_NE(ctx, nullptr) << "tensor-less file, pad=" << pad;
    if (ctx) free_ctx(ctx);
  }
  ::dlclose(h);
}

}  // namespace
}  // namespace fucina::gguf
