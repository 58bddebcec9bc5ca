#pragma once
// Routed MoE experts read from the GGUF on demand into a bounded cache (`--moe-stream`).
//
// Note [Streamed experts]: the routed expert matrices (ffn_{gate,up,down}_exps) are most of
// a MoE model's bytes, and a token uses k of n_expert of them per layer. With
// LoadOptions::moe_stream the file is opened with only the other tensors mapped (attention,
// norms, router, embeddings: resident as usual; gguf::Reader::open with a filter), so the
// expert region takes no address space at all. An ExpertStore reads one expert of one layer
// (its gate, up and down rows, the file's bytes unchanged) with pread into a slot of a pool
// allocated once: moe_cache_bytes / (the largest expert's size) slots. The products then run the same kernels
// over the same bytes as the resident path (expert_stack over one expert), so the logits are
// bitwise the resident ones. The page cache must not become the real cache: each read is
// dropped from it with posix_fadvise(DONTNEED), or bypasses it (moe_direct_io: O_DIRECT into
// 4 KiB-aligned buffers). Eviction: among slots not in use, the lowest
// last_use + freq_weight·log2(1 + uses) (LRU with a frequency term: an expert used often
// outlives a once-used one by freq_weight fetches per doubling). Hot experts are pinned: a
// slot with more uses (since it was read) than the (slots/4)-th most used one, and at least
// 2, is evicted only when no other slot can be, so the most used quarter of the cache
// survives any run of cold experts however long (the frequency term alone delays that by
// freq_weight·log2 fetches). A slot is also pinned while an
// ExpertFfn (or a weight copied from one) refers to it and while it is being read; a cache of
// one slot works (moe_ffn holds one expert at a time), only slower. Prefetch: moe_ffn hands
// the store, once per layer, the experts the layer is about to fetch and the ones the next
// layer's router picks for the same hidden state (a guess: the residual stream drifts slowly
// between layers); a background thread reads them into slots untouched since that hint, while
// the products run. A later hint replaces the rest of an earlier one. Guesses cost reads: once
// 64 were read and fewer than 1 in 4 of them were used (a router the residual stream does not
// predict, as a random model's), the store stops guessing.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "fucina/gguf/reader.hpp"
#include "fucina/model/config.hpp"
#include "fucina/model/weights.hpp"

namespace fucina::model {

// One routed expert's three matrices.
struct ExpertFfn {
  Weight<"eff", "embd"> gate, up;
  Weight<"embd", "eff"> down;
};

// Expert e of a layer whose experts are resident (the mapped stacks).
ExpertFfn resident_expert(const LayerWeights& w, std::int64_t e);

struct ExpertStoreStats {
  std::int64_t slots = 0;
  std::uint64_t expert_bytes = 0;   // one expert of one layer: gate + up + down
  std::uint64_t hits = 0;           // fetches served from the cache (prefetched ones included)
  std::uint64_t misses = 0;         // fetches that read the file themselves
  std::uint64_t prefetched = 0;     // experts the background thread read
  std::uint64_t guesses_read = 0;   // of which on the next-layer guess
  std::uint64_t guesses_used = 0;   // guessed experts fetched before they were evicted
  std::uint64_t bytes_read = 0;     // by both threads
  double read_seconds = 0;          // time spent in pread, both threads
};

class ExpertStore {
 public:
  // `file` must be `path` opened (in part or whole); `routers[l]` is layer l's router, for
  // the next layer's guess; options.moe_*: the cache size, O_DIRECT (buffered reads where the
  // file system refuses it), the prefetch thread. Throws InvalidArgument when the cache cannot hold one expert,
  // InvalidFile / Unsupported for an expert stack of the wrong shape or type, Io when the file
  // cannot be opened.
  ExpertStore(const std::filesystem::path& path, const gguf::Reader& file, const ModelConfig& config,
              std::vector<Weight<"expert", "embd">> routers, const LoadOptions& options);
  ~ExpertStore();
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  // Expert e of layer l, read from the file unless cached; its slot stays pinned while the
  // result or any weight copied from it lives. Io when the read fails; InvalidArgument when
  // every slot is pinned.
  ExpertFfn fetch(std::int64_t layer, std::int64_t expert);
  // Note [Streamed experts] prefetch: `experts` of `layer` (in the order they will be fetched),
  // then the experts layer + 1's router picks for h's rows; replaces the previous hint.
  void prefetch(Context& ctx, std::int64_t layer, std::span<const std::int32_t> experts, const Tensor<"seq", "embd">& h);

  ExpertStoreStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True for a routed expert stack's tensor name (blk.N.ffn_{gate,up,down}_exps.weight).
bool is_routed_expert_tensor(std::string_view name);

}  // namespace fucina::model
