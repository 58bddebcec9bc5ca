#include "fucina/model/paged_kv_cache.hpp"

#include <algorithm>

#include "fucina/core/huge_pages.hpp"
#include "fucina/core/raw/elementwise.hpp"

namespace fucina::model {

PagedKvCache::PagedKvCache(const ModelConfig& c, std::int64_t n_tokens, std::int64_t n_ctx, KvType type,
                           std::int64_t block_size)
    : n_ctx_(n_ctx), block_size_(block_size), type_(type) {
  FUCINA_CHECK(n_ctx > 0 && n_tokens > 0, InvalidArgument,
               "[kv_cache] context length and budget must be positive, got {} and {}", n_ctx, n_tokens);
  FUCINA_CHECK(block_size > 0, InvalidArgument, "[kv_cache] block size must be positive, got {}", block_size);
  const std::int64_t n_blocks = (n_tokens + block_size - 1) / block_size;
  KvCache::check_fits(c, n_blocks * block_size, type);
  // On huge pages when a head's region fits in one (Note [Huge pages]): a decode step's
  // attention reads a run per sequence and KV head of every layer, and its new rows fault
  // pages in inside the step.
  const std::int64_t n_rows = n_blocks * block_size;
  const bool huge = KvCache::layer_bytes(c, n_rows, type) / static_cast<std::size_t>(c.n_head_kv) <= kHugePageBytes;
  KvCache::allocate(c, n_rows, type, huge, k_, v_);
  refs_.assign(static_cast<std::size_t>(n_blocks), 0);
  for (std::int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<std::int32_t>(b));  // block 0 first
}

const PagedKvCache::Sequence& PagedKvCache::at(SeqId seq) const {
  FUCINA_CHECK(is_open(seq), InvalidArgument, "[kv_cache] sequence {} is not open", seq);
  return seqs_[static_cast<std::size_t>(seq)];
}

bool PagedKvCache::is_open(SeqId seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < seqs_.size() && seqs_[static_cast<std::size_t>(seq)].open;
}

std::int64_t PagedKvCache::size(SeqId seq) const { return at(seq).size; }

SeqId PagedKvCache::open() {
  for (std::size_t i = 0; i < seqs_.size(); ++i)
    if (!seqs_[i].open) {
      seqs_[i] = {.open = true};
      return static_cast<SeqId>(i);
    }
  seqs_.push_back({.open = true});
  return static_cast<SeqId>(seqs_.size() - 1);
}

std::int32_t PagedKvCache::take_block() {
  FUCINA_ASSERT(!free_.empty());
  const std::int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(b)] = 1;
  return b;
}

void PagedKvCache::release(std::int32_t block) {
  if (--refs_[static_cast<std::size_t>(block)] == 0) free_.push_back(block);
}

SeqId PagedKvCache::fork(Context& ctx, SeqId src, std::int64_t n) {
  FUCINA_CHECK(n >= 0 && n <= size(src), InvalidArgument, "[kv_cache] cannot share {} positions of a sequence of {}", n,
               size(src));
  const std::int64_t full = n / block_size_, tail = n % block_size_;
  FUCINA_CHECK(tail == 0 || !free_.empty(), InvalidArgument, "[kv_cache] the KV budget of {} blocks is used up",
               total_blocks());
  const SeqId seq = open();  // may grow seqs_: index, do not hold references across it
  Sequence& s = seqs_[static_cast<std::size_t>(seq)];
  const Sequence& from = seqs_[static_cast<std::size_t>(src)];
  s.blocks.assign(from.blocks.begin(), from.blocks.begin() + full);
  for (const std::int32_t b : s.blocks) ++refs_[static_cast<std::size_t>(b)];
  if (tail > 0) {
    const std::int32_t b = take_block(), shared = from.blocks[static_cast<std::size_t>(full)];
    for (auto* pools : {&k_, &v_})
      for (const RawTensor& pool : *pools) {
        RawTensor dst = rows(pool, b, 0, tail);
        raw::copy(ctx, rows(pool, shared, 0, tail), dst);
      }
    s.blocks.push_back(b);
  }
  s.size = n;
  return seq;
}

void PagedKvCache::close(SeqId seq) {
  at(seq);
  Sequence& s = seqs_[static_cast<std::size_t>(seq)];
  for (const std::int32_t b : s.blocks) release(b);
  s = {};
}

void PagedKvCache::truncate(SeqId seq, std::int64_t n) {
  at(seq);
  Sequence& s = seqs_[static_cast<std::size_t>(seq)];
  if (n >= s.size) return;
  FUCINA_CHECK(n >= 0, InvalidArgument, "[kv_cache] cannot keep {} positions", n);
  const auto keep = static_cast<std::size_t>((n + block_size_ - 1) / block_size_);
  FUCINA_CHECK(n % block_size_ == 0 || refs_[static_cast<std::size_t>(s.blocks[keep - 1])] == 1, InvalidArgument,
               "[kv_cache] cannot cut sequence {} at {} inside a block it shares", seq, n);
  for (std::size_t b = keep; b < s.blocks.size(); ++b) release(s.blocks[b]);
  s.blocks.resize(keep);
  s.size = n;
}

std::int64_t PagedKvCache::blocks_needed(SeqId seq, std::int64_t n) const {
  const Sequence& s = at(seq);
  return std::max<std::int64_t>(0, (s.size + n + block_size_ - 1) / block_size_ - static_cast<std::int64_t>(s.blocks.size()));
}

void PagedKvCache::reserve(SeqId seq, std::int64_t n) {
  const Sequence& s = at(seq);
  FUCINA_CHECK(s.size + n <= n_ctx_, InvalidArgument,
               "[kv_cache] context is full: {} cached + {} new tokens > context length {} (raise --ctx)", s.size, n, n_ctx_);
  const std::int64_t need = blocks_needed(seq, n);
  FUCINA_CHECK(need <= free_blocks(), InvalidArgument,
               "[kv_cache] the KV budget is used up: {} more blocks of {} positions needed, {} free of {}", need,
               block_size_, free_blocks(), total_blocks());
  for (std::int64_t i = 0; i < need; ++i) seqs_[static_cast<std::size_t>(seq)].blocks.push_back(take_block());
}

RawTensor PagedKvCache::rows(const RawTensor& pool, std::int32_t block, std::int64_t row, std::int64_t n) const {
  RawTensor view = pool;
  view.offset += (block * block_size_ + row) * view.strides[0];
  view.shape[0] = n;
  return view;
}

void PagedKvCache::store(Context& ctx, std::int64_t layer, SeqId seq, const Rows& k, const Rows& v) {
  const Sequence& s = at(seq);
  const std::int64_t n = k.size<"seq">();
  FUCINA_ASSERT(s.size + n <= static_cast<std::int64_t>(s.blocks.size()) * block_size_);
  for (auto [src, pools] : {std::pair{&k, &k_}, std::pair{&v, &v_}}) {
    const RawTensor& pool = (*pools)[static_cast<std::size_t>(layer)];
    for (std::int64_t i = 0; i < n;) {  // one run of rows per block
      const std::int64_t p = s.size + i, row = p % block_size_, m = std::min(n - i, block_size_ - row);
      RawTensor from = src->raw();
      from.offset += i * from.strides[0];
      from.shape[0] = m;
      RawTensor dst = rows(pool, s.blocks[static_cast<std::size_t>(p / block_size_)], row, m);
      KvCache::write_rows(ctx, Rows(std::move(from)), dst, type_);
      i += m;
    }
  }
}

RawTensor PagedKvCache::gather(Context& ctx, const RawTensor& pool, const Sequence& s, std::int64_t n) const {
  FUCINA_ASSERT(n <= static_cast<std::int64_t>(s.blocks.size()) * block_size_);
  RawTensor out = ctx.empty(pool.dtype, 3, Dims{n, pool.shape[1], pool.shape[2]});
  for (std::int64_t p = 0; p < n; p += block_size_) {  // the pool's layout read through its strides
    const std::int64_t m = std::min(block_size_, n - p);
    RawTensor dst = out;
    dst.offset += p * out.strides[0];
    dst.shape[0] = m;
    raw::copy(ctx, rows(pool, s.blocks[static_cast<std::size_t>(p / block_size_)], 0, m), dst);
  }
  return out;
}

RawTensor PagedKvCache::keys(Context& ctx, std::int64_t layer, SeqId seq, std::int64_t n) const {
  return gather(ctx, k_[static_cast<std::size_t>(layer)], at(seq), n);
}
RawTensor PagedKvCache::values(Context& ctx, std::int64_t layer, SeqId seq, std::int64_t n) const {
  return gather(ctx, v_[static_cast<std::size_t>(layer)], at(seq), n);
}

void PagedKvCache::advance(SeqId seq, std::int64_t n) {
  const Sequence& s = at(seq);
  FUCINA_CHECK(s.size + n <= static_cast<std::int64_t>(s.blocks.size()) * block_size_, InvalidArgument,
               "[kv_cache] advance past the reserved positions of sequence {}", seq);
  seqs_[static_cast<std::size_t>(seq)].size += n;
}

}  // namespace fucina::model
