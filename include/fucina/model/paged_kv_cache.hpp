#pragma once
// A key/value cache shared by many sequences (batched decode, model.hpp Note [Batched
// forward]): one budget of fixed-size blocks, each sequence a table of blocks.
//
// Note [Paged KV cache]: every layer holds K and V as [n_blocks · block_size, kvh, hd] views
// (f16 by default, f32, or q8_0: Note [q8_0 KV cache]) of head-major storage
// (Note [Head-major KV]: one head's rows of consecutive blocks are contiguous), all layers in
// one allocation, on huge pages when a head's region fits in one (Note [Huge pages]). Position p of
// a sequence lives in row p % block_size of block table[p / block_size]. Blocks are reference
// counted: fork(src, n) starts a sequence with the first n positions of src, sharing src's
// full blocks without copying them; the rows of a partly filled last block are copied into a
// block of its own, so a block is only ever written by its one owner. close() hands back the
// blocks no other sequence holds. A sequence has a context limit n_ctx, as a solo KvCache's
// capacity (it also picks the split of Note [split decode], so a batched row gets its solo
// run's arithmetic). Decode rows (and chunks of < 64 rows) read the blocks in place through
// view() (a KvView: the one-row kernel walks keys in runs that never cross a block,
// Note [Decode at depth]); longer prompt chunks on the tiled kernel read the sequence's rows
// gathered into one contiguous [n, kvh, hd] tensor by keys()/values(), a copy per layer that
// their n rows share.
//
// The protocol per sequence is Note [KV cache protocol] in kv_cache.hpp: reserve(), then per
// layer store() and keys()/values(), then advance() once every layer is done.
#include <cstdint>
#include <vector>

#include "fucina/model/kv_cache.hpp"

namespace fucina::model {

using SeqId = std::int32_t;

class PagedKvCache {
 public:
  using Rows = KvCache::Rows;

  static constexpr std::int64_t default_block_size = 32;
  // n_tokens: the budget, in positions, shared by all sequences (rounded up to whole blocks).
  // The storage is its own (Note [Huge pages]), not the context's pool.
  PagedKvCache(const ModelConfig& config, std::int64_t n_tokens, std::int64_t n_ctx,
               KvType type = KvType::f16, std::int64_t block_size = default_block_size);
  // The budget that holds n_seqs sequences of n positions each at once (whole blocks each).
  static std::int64_t budget_for(std::int64_t n_seqs, std::int64_t n, std::int64_t block_size = default_block_size) {
    return n_seqs * ((n + block_size - 1) / block_size * block_size);
  }

  std::int64_t capacity() const { return n_ctx_; }  // per sequence
  std::int64_t block_size() const { return block_size_; }
  std::int64_t total_blocks() const { return static_cast<std::int64_t>(refs_.size()); }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  KvType type() const { return type_; }

  SeqId open();  // a new empty sequence
  // A new sequence holding the first n positions of src (Note [Paged KV cache]).
  SeqId fork(Context& ctx, SeqId src, std::int64_t n);
  void close(SeqId seq);
  bool is_open(SeqId seq) const;
  std::int64_t size(SeqId seq) const;

  // How many free blocks reserve(seq, n) would take.
  std::int64_t blocks_needed(SeqId seq, std::int64_t n) const;
  // Makes room for n more positions of seq; throws InvalidArgument, naming the limit, when
  // the sequence's context or the shared budget cannot hold them.
  void reserve(SeqId seq, std::int64_t n);
  // k/v: the rows of positions size(seq) .. size(seq) + n - 1, reserved.
  void store(Context& ctx, std::int64_t layer, SeqId seq, const Rows& k, const Rows& v);
  // The first n positions of seq, contiguous, in the cache's type.
  RawTensor keys(Context& ctx, std::int64_t layer, SeqId seq, std::int64_t n) const;
  RawTensor values(Context& ctx, std::int64_t layer, SeqId seq, std::int64_t n) const;
  // seq's rows of one layer in place, through its block table (valid until seq grows).
  KvView view(std::int64_t layer, SeqId seq) const {
    return {k_[static_cast<std::size_t>(layer)], v_[static_cast<std::size_t>(layer)], at(seq).blocks, block_size_, type_};
  }
  void advance(SeqId seq, std::int64_t n);
  // Forgets seq's positions from n on (speculative rows not accepted) and hands back the
  // blocks left empty. Throws InvalidArgument when the block that would hold position n is
  // shared: a block is only ever written by its one owner.
  void truncate(SeqId seq, std::int64_t n);

 private:
  struct Sequence {
    bool open = false;
    std::int64_t size = 0;
    std::vector<std::int32_t> blocks{};
  };
  const Sequence& at(SeqId seq) const;
  std::int32_t take_block();
  void release(std::int32_t block);
  // Rows [row, row + n) of block b in the pool of one layer.
  RawTensor rows(const RawTensor& pool, std::int32_t block, std::int64_t row, std::int64_t n) const;
  RawTensor gather(Context& ctx, const RawTensor& pool, const Sequence& s, std::int64_t n) const;

  std::int64_t n_ctx_, block_size_;
  KvType type_;
  std::vector<RawTensor> k_, v_;  // [n_blocks · block_size, kvh, hd] views per layer, head-major
  std::vector<std::int32_t> refs_;  // per block: how many sequences hold it
  std::vector<std::int32_t> free_;  // blocks nobody holds
  std::vector<Sequence> seqs_;      // indexed by SeqId; closed ids are reused
};

}  // namespace fucina::model
