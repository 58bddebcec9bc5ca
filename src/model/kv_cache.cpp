#include "fucina/model/kv_cache.hpp"

#include <unistd.h>

#include "fucina/core/raw/elementwise.hpp"

namespace fucina::model {

namespace {

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

}  // namespace

void KvCache::check_fits(const ModelConfig& c, std::int64_t n_positions, DType dtype) {
  // Sized before anything is allocated, so a context the machine cannot hold is reported as
  // such rather than as a bare std::bad_alloc.
  const double bytes = 2.0 * static_cast<double>(c.n_layer) * static_cast<double>(n_positions) *
                       static_cast<double>(c.n_head_kv) * static_cast<double>(c.head_dim) *
                       static_cast<double>(dtype_size(dtype));
  const double ram = physical_memory_bytes();
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  FUCINA_CHECK(ram == 0.0 || bytes <= ram, InvalidArgument,
               "[kv_cache] a {}-token context needs {:.1f} GiB of KV cache, more than this machine's {:.1f} GiB of "
               "memory (lower --ctx)",
               n_positions, bytes / gib, ram / gib);
}

KvCache::KvCache(Context& ctx, const ModelConfig& c, std::int64_t n_ctx, DType dtype) : n_ctx_(n_ctx), dtype_(dtype) {
  FUCINA_CHECK(n_ctx > 0, InvalidArgument, "[kv_cache] context length must be positive, got {}", n_ctx);
  FUCINA_CHECK(dtype == DType::f16 || dtype == DType::f32, InvalidArgument, "[kv_cache] cache type must be f16 or f32");
  check_fits(c, n_ctx, dtype);
  const Dims shape{n_ctx, c.n_head_kv, c.head_dim};
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    k_.push_back(ctx.empty(dtype, 3, shape));
    v_.push_back(ctx.empty(dtype, 3, shape));
  }
}

void KvCache::reserve(std::int64_t n) const {
  FUCINA_CHECK(size_ + n <= n_ctx_, InvalidArgument,
               "[kv_cache] context is full: {} cached + {} new tokens > context length {} (raise --ctx)", size_, n, n_ctx_);
}

void KvCache::store(Context& ctx, std::int64_t layer, const Rows& k, const Rows& v) {
  const std::int64_t n = k.size<"seq">();
  reserve(n);
  for (auto [src, dst] : {std::pair{&k, &k_}, std::pair{&v, &v_}}) {
    RawTensor slot = (*dst)[static_cast<std::size_t>(layer)];
    slot.offset += size_ * slot.strides[0];
    slot.shape[0] = n;
    raw::copy(ctx, src->raw(), slot);  // rounds to f16 for an f16 cache
  }
}

KvCache::Cached KvCache::read(Context& ctx, const RawTensor& t, std::int64_t n) const {
  RawTensor view = stored(t, n);
  if (dtype_ == DType::f32) return Cached(std::move(view));
  return TensorT<DType::f16, "kseq", "kvh", "hd">(std::move(view)).to<DType::f32>(ctx);
}

KvCache::Cached KvCache::keys(Context& ctx, std::int64_t layer, std::int64_t n) const {
  return read(ctx, k_[static_cast<std::size_t>(layer)], n);
}
KvCache::Cached KvCache::values(Context& ctx, std::int64_t layer, std::int64_t n) const {
  return read(ctx, v_[static_cast<std::size_t>(layer)], n);
}

RawTensor KvCache::stored(const RawTensor& t, std::int64_t n) const {
  FUCINA_ASSERT(n <= n_ctx_);
  RawTensor view = t;
  view.shape[0] = n;
  return view;
}
RawTensor KvCache::stored_keys(std::int64_t layer, std::int64_t n) const { return stored(k_[static_cast<std::size_t>(layer)], n); }
RawTensor KvCache::stored_values(std::int64_t layer, std::int64_t n) const {
  return stored(v_[static_cast<std::size_t>(layer)], n);
}

void KvCache::advance(std::int64_t n) {
  reserve(n);
  size_ += n;
}

}  // namespace fucina::model
