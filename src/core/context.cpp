#include "fucina/core/context.hpp"

#include <fmt/core.h>

#include "fucina/core/error.hpp"

namespace fucina {

Context::Context(ContextOptions opts)
    : buffers_(new BufferPool(opts.max_cached_bytes)), alloc_(buffers_) {
  FUCINA_CHECK(opts.threads >= 0, InvalidArgument, "[Context] threads must be >= 0, got {}", opts.threads);
  threads_ = std::make_unique<ThreadPool>(opts.threads);
}

Context::~Context() {
  const PoolStats s = buffers_->stats();
  if (s.outstanding == 0) {
    delete buffers_;
  } else {
    // Tensors that outlive the context still return their buffers to this pool, so
    // keep it alive (a leak, reported) rather than let them touch freed memory.
    buffers_->trim();
    fmt::print(stderr, "fucina: Context destroyed with {} live buffer(s) ({} bytes) still referenced\n",
               s.outstanding, s.outstanding_bytes);
  }
}

RawTensor Context::empty(DType dtype, int rank, const Dims& shape) {
  FUCINA_CHECK(rank >= 0 && rank <= kMaxRank, InvalidShape, "[empty] rank {} is outside 0..8", rank);
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    FUCINA_CHECK(shape[i] > 0, InvalidShape, "[empty] axis {} has size {}; sizes must be positive", i, shape[i]);
    FUCINA_CHECK(n <= (std::int64_t{1} << 40) / shape[i], InvalidShape, "[empty] tensor too large");
    n *= shape[i];
  }
  RawTensor t;
  t.buf = alloc_->acquire(static_cast<std::size_t>(n) * dtype_size(dtype));
  t.dtype = dtype;
  t.rank = rank;
  t.shape = shape;
  t.strides = contiguous_strides(shape, rank);
  t.offset = 0;
  return t;
}

}  // namespace fucina
