#pragma once
// Per-sequence key/value cache: for each layer, K and V as Tensor<"kseq","kvh","hd"> over
// the whole context, f16 by default (as llama.cpp) or f32.
//
// Note [KV cache protocol]: a forward pass of n tokens stores each layer's K/V at rows
// [size(), size() + n) with store(), reads rows [0, size() + n) with keys()/values(),
// and calls advance(n) once every layer is done. reserve(n) checks the context first, so
// a full cache is a clear error before any work.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "fucina/fucina.hpp"
#include "fucina/model/config.hpp"

namespace fucina::model {

// Where one layer's cached keys and values of one sequence live, read in place by the
// attention kernels: position p is row row(p) of `keys` / `values` ([rows, kvh, hd], the
// cache's type). A solo cache is one block (no table); a paged cache maps positions through
// its block table (Note [Paged KV cache]).
struct KvView {
  RawTensor keys, values;
  std::span<const std::int32_t> blocks{};  // empty: position p is row p
  std::int64_t block_size = 0;
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
  using Rows = Tensor<"seq", "kvh", "hd">;
  using Cached = Tensor<"kseq", "kvh", "hd">;

  KvCache(Context& ctx, const ModelConfig& config, std::int64_t n_ctx, DType dtype = DType::f16);

  std::int64_t capacity() const { return n_ctx_; }
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
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
  KvView view(std::int64_t layer) const { return {k_[static_cast<std::size_t>(layer)], v_[static_cast<std::size_t>(layer)]}; }
  void advance(std::int64_t n);

  // Throws InvalidArgument when K/V for n_positions do not fit in this machine's memory.
  static void check_fits(const ModelConfig& config, std::int64_t n_positions, DType dtype);

 private:
  RawTensor stored(const RawTensor& t, std::int64_t n) const;
  Cached read(Context& ctx, const RawTensor& t, std::int64_t n) const;
  std::int64_t n_ctx_ = 0;
  std::int64_t size_ = 0;
  DType dtype_ = DType::f16;
  std::vector<RawTensor> k_, v_;  // [n_ctx, kvh, hd] per layer
};

}  // namespace fucina::model
