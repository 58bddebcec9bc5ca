#include "fucina/model/kv_cache.hpp"

#include <unistd.h>

#include "fucina/core/huge_pages.hpp"
#include "fucina/core/raw/elementwise.hpp"
#include "fucina/quant/blocks_legacy.hpp"

namespace fucina::model {

namespace {

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

constexpr std::int64_t kQ8Block = 32, kQ8Units = 17;  // values per Q8_0 block; f16 units per block

DType storage_dtype(KvType t) { return t == KvType::f32 ? DType::f32 : DType::f16; }
// Stored units per row of hd values.
std::int64_t row_units(KvType t, std::int64_t hd) { return t == KvType::q8_0 ? hd / kQ8Block * kQ8Units : hd; }

void check_layout(const ModelConfig& c, KvType type) {
  FUCINA_CHECK(type != KvType::q8_0 || c.head_dim % kQ8Block == 0, Unsupported,
               "[kv_cache] a q8_0 cache needs a head size that is a multiple of 32, got {}", c.head_dim);
}

// One layer's K or V from byte `at` of `buf`: an [n_rows, kvh, units] view of [kvh][n_rows][units].
RawTensor layer_view(BufferRef buf, std::size_t at, const ModelConfig& c, std::int64_t n_rows, KvType type) {
  const std::int64_t kvh = c.n_head_kv, units = row_units(type, c.head_dim);
  RawTensor t;
  t.buf = std::move(buf);
  t.dtype = storage_dtype(type);
  t.rank = 3;
  t.shape = Dims{n_rows, kvh, units};
  t.strides = Dims{units, n_rows * units, 1};
  t.offset = static_cast<std::int64_t>(at / dtype_size(t.dtype));
  return t;
}

}  // namespace

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (const KvType t : {KvType::f32, KvType::f16, KvType::q8_0})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

std::string_view kv_type_name(KvType type) {
  switch (type) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::q8_0: return "q8_0";
  }
  return "?";
}

std::size_t KvCache::layer_bytes(const ModelConfig& c, std::int64_t n_rows, KvType type) {
  const auto bytes = static_cast<std::size_t>(c.n_head_kv * n_rows * row_units(type, c.head_dim)) *
                     dtype_size(storage_dtype(type));
  return (bytes + 63) / 64 * 64;
}

void KvCache::allocate(const ModelConfig& c, std::int64_t n_rows, KvType type, bool huge, std::vector<RawTensor>& k,
                       std::vector<RawTensor>& v) {
  check_layout(c, type);  // before allocating
  const std::size_t layer = layer_bytes(c, n_rows, type);
  const BufferRef storage = aligned_buffer(2 * static_cast<std::size_t>(c.n_layer) * layer, huge ? kHugePageBytes : 64);
  k.clear(), v.clear();
  for (std::size_t l = 0; l < static_cast<std::size_t>(c.n_layer); ++l) {
    k.push_back(layer_view(storage, 2 * l * layer, c, n_rows, type));
    v.push_back(layer_view(storage, (2 * l + 1) * layer, c, n_rows, type));
  }
}

void KvCache::write_rows(Context& ctx, const Rows& rows, RawTensor& dst, KvType type) {
  if (type != KvType::q8_0) return raw::copy(ctx, rows.raw(), dst);  // rounds to f16 for an f16 cache
  const auto src = contiguous(ctx, rows);
  const std::int64_t n = src.size<"seq">(), kvh = src.size<"kvh">(), hd = src.size<"hd">();
  ctx.pool().parallel_for(n * kvh, [&](std::int64_t r) {
    auto* out = reinterpret_cast<quant::BlockQ8_0*>(dst.data<Half>() + (r / kvh) * dst.strides[0] + (r % kvh) * dst.strides[1]);
    quant::quantize_act_q8_0(src.data().data() + r * hd, out, hd);
  });
}

void KvCache::check_fits(const ModelConfig& c, std::int64_t n_positions, KvType type) {
  // Sized before anything is allocated, so a context the machine cannot hold is reported as
  // such rather than as a bare std::bad_alloc.
  const double bytes = 2.0 * static_cast<double>(c.n_layer) * static_cast<double>(n_positions) *
                       static_cast<double>(c.n_head_kv) * static_cast<double>(row_units(type, c.head_dim)) *
                       static_cast<double>(dtype_size(storage_dtype(type)));
  const double ram = physical_memory_bytes();
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  FUCINA_CHECK(ram == 0.0 || bytes <= ram, InvalidArgument,
               "[kv_cache] a {}-token context needs {:.1f} GiB of KV cache, more than this machine's {:.1f} GiB of "
               "memory (lower --ctx)",
               n_positions, bytes / gib, ram / gib);
}

KvCache::KvCache(const ModelConfig& c, std::int64_t n_ctx, KvType type) : n_ctx_(n_ctx), type_(type) {
  FUCINA_CHECK(n_ctx > 0, InvalidArgument, "[kv_cache] context length must be positive, got {}", n_ctx);
  check_fits(c, n_ctx, type);
  const bool huge = 2 * static_cast<std::size_t>(c.n_layer) * layer_bytes(c, n_ctx, type) <= kHugeSoloBytes;
  allocate(c, n_ctx, type, huge, k_, v_);
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
    write_rows(ctx, *src, slot, type_);
  }
}

KvCache::Cached KvCache::read(Context& ctx, const RawTensor& t, std::int64_t n) const {
  FUCINA_CHECK(type_ != KvType::q8_0, Unsupported, "[kv_cache] a q8_0 cache is read by the attention kernel only");
  RawTensor view = stored(t, n);
  if (type_ == KvType::f32) return Cached(std::move(view));
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
