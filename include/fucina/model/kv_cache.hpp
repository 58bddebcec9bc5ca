#pragma once
// Per-sequence key/value cache: for each layer, K and V as Tensor<"kseq","kvh","hd"> over
// the whole context, f16 by default (as llama.cpp), f32, or q8_0.
//
// Note [q8_0 KV cache] (llama.cpp's -ctk q8_0 -ctv q8_0): each head's row of head_dim values
// is stored as Q8_0 blocks of 32 (an f16 scale and 32 int8), encoded as ggml's CPU backend
// encodes (quant::quantize_act_q8_0): 34 bytes per 32 values, 53% of f16. The blocks are held
// in an f16-typed buffer, 17 units per block, so views and strides work as for f16. Attention
// over it is ggml's one-row path for quantized K/V at every batch size (flash_attention_q8_0).
//
// Note [Head-major KV]: each layer's K and V are stored head by head, [kvh][rows][units]
// (rows: a solo cache's n_ctx, a paged cache's n_blocks · block_size), and handed out as
// [rows, kvh, units] views whose strides say so (every reader goes through strides). An
// attention task (one KV head) then reads its keys as one contiguous run, a paged
// sequence's consecutive blocks as one too, rather than 256-byte rows kvh rows apart, which
// the hardware prefetchers follow poorly from DRAM: depth 4096 decode 27-29 -> 35-45 t/s
// solo, 25 -> 34-35 t/s paged (docs/BENCHMARK.md, issue 20). Measured and not kept: head-major
// inside each paged block ([n_blocks][kvh][block_size][units], 8 KiB runs per head, then a
// jump): ~10% slower at 8 streams of 128-192 positions than position-major; only 256-position
// blocks caught up.
//
// Note [KV cache pages]: on this machine (a VM) a first write to a 4 KiB page costs ~10 us
// (a VM exit), and a head-major cache meets a fresh page every 32 positions of each head:
// ~1 fault per position for the default model, inside the decode steps. A 2 MiB huge page
// commits at ~0.2-3.6 us per 4 KiB, but a head-major cache then commits every page at the
// first token (each head's region starts in one). So a solo cache takes huge pages when it
// is small enough to commit whole (at most kHugeSoloBytes: the default model's 512-token
// cache is 2 MiB, and its copy task faulted ~500 times less, docs/BENCHMARK.md issue 23
// seventh part), and a long one keeps 4 KiB pages: Qwen3-0.6B's shape at -c 4096 (448 MiB)
// took 0.8 s more before its first token on huge pages, to save ~13 ms of faults in 32
// tokens. A paged pool takes them when each head's region fits in one huge page
// (Note [Huge pages]).
//
// Note [KV cache protocol]: a forward pass of n tokens stores each layer's K/V at rows
// [size(), size() + n) with store(), reads rows [0, size() + n) with keys()/values(),
// and calls advance(n) once every layer is done. reserve(n) checks the context first, so
// a full cache is a clear error before any work.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fucina/fucina.hpp"
#include "fucina/model/config.hpp"

namespace fucina::model {

// The element type of a KV cache.
enum class KvType : std::uint8_t { f32, f16, q8_0 };
// "f32", "f16", "q8_0"; nullopt for any other name.
std::optional<KvType> kv_type_from_name(std::string_view name);
std::string_view kv_type_name(KvType type);

// Where one layer's cached keys and values of one sequence live, read in place by the
// attention kernels: position p is row row(p) of `keys` / `values` ([rows, kvh, hd], the
// cache's type, read through their strides). A solo cache is one block (no table); a paged cache maps positions through
// its block table (Note [Paged KV cache]).
struct KvView {
  RawTensor keys, values;
  std::span<const std::int32_t> blocks{};  // empty: position p is row p
  std::int64_t block_size = 0;
  KvType type = KvType::f16;
  std::int64_t row(std::int64_t p) const {
    return blocks.empty() ? p : blocks[static_cast<std::size_t>(p / block_size)] * block_size + p % block_size;
  }
  // The end of the run of positions from p that are consecutive rows (p's block).
  std::int64_t run_end(std::int64_t p, std::int64_t end) const {
    return blocks.empty() ? end : std::min(end, (p / block_size + 1) * block_size);
  }
};

class KvCache {
 public:
  static constexpr std::size_t kHugeSoloBytes = std::size_t{32} << 20;  // Note [KV cache pages]

  using Rows = Tensor<"seq", "kvh", "hd">;
  using Cached = Tensor<"kseq", "kvh", "hd">;

  KvCache(const ModelConfig& config, std::int64_t n_ctx, KvType type = KvType::f16);

  std::int64_t capacity() const { return n_ctx_; }
  std::int64_t size() const { return size_; }
  KvType type() const { return type_; }
  void clear() { size_ = 0; }
  // Keeps the first n rows (a shared prompt prefix); later rows are overwritten by store().
  void truncate(std::int64_t n) { size_ = std::clamp<std::int64_t>(n, 0, size_); }
  // Throws InvalidArgument when n more tokens do not fit.
  void reserve(std::int64_t n) const;
  void store(Context& ctx, std::int64_t layer, const Rows& k, const Rows& v);
  Cached keys(Context& ctx, std::int64_t layer, std::int64_t n) const;
  Cached values(Context& ctx, std::int64_t layer, std::int64_t n) const;
  // The stored rows themselves, in the cache's type (views, no copy).
  RawTensor stored_keys(std::int64_t layer, std::int64_t n) const;
  RawTensor stored_values(std::int64_t layer, std::int64_t n) const;
  KvView view(std::int64_t layer) const {
    return {k_[static_cast<std::size_t>(layer)], v_[static_cast<std::size_t>(layer)], {}, 0, type_};
  }
  void advance(std::int64_t n);

  // Throws InvalidArgument when K/V for n_positions do not fit in this machine's memory.
  static void check_fits(const ModelConfig& config, std::int64_t n_positions, KvType type);
  // Every layer's K and V over n_rows rows, in one block, as [n_rows, kvh, units] views of
  // head-major storage (Note [Head-major KV], Note [q8_0 KV cache]); on huge pages when `huge`
  // (Note [Huge pages], Note [KV cache pages]). Throws Unsupported for a q8_0 cache of a head
  // size that is not a multiple of 32.
  static void allocate(const ModelConfig& config, std::int64_t n_rows, KvType type, bool huge,
                       std::vector<RawTensor>& k, std::vector<RawTensor>& v);
  // The bytes of one layer's K or V, rounded up to 64 so layers placed back to back stay aligned.
  static std::size_t layer_bytes(const ModelConfig& config, std::int64_t n_rows, KvType type);
  // Writes rows (f32 or f32-convertible, [n, kvh, hd]) into dst ([n, kvh, units] of `type`,
  // any strides).
  static void write_rows(Context& ctx, const Rows& rows, RawTensor& dst, KvType type);

 private:
  RawTensor stored(const RawTensor& t, std::int64_t n) const;
  Cached read(Context& ctx, const RawTensor& t, std::int64_t n) const;
  std::int64_t n_ctx_ = 0;
  std::int64_t size_ = 0;
  KvType type_ = KvType::f16;
  std::vector<RawTensor> k_, v_;  // per layer, [n_ctx, kvh, units] views of [kvh][n_ctx][units]
};

}  // namespace fucina::model
