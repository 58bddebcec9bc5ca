#include "fucina/quant/packed.hpp"

#include <cstdlib>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/huge_pages.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/k_quants.hpp"
#include "packed_formats.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::quant {

namespace {

using detail::PackedFormat;

// Formats with packed kernels.
constexpr const PackedFormat& (*kFormats[])() = {detail::packed_q8_0, detail::packed_q4_0, detail::packed_q4_K,
                                                  detail::packed_q6_K};

const PackedFormat* find_format(QuantType type) {
  for (auto f : kFormats)
    if (f().type == type) return &f();
  return nullptr;
}

const PackedFormat& format_of(QuantType type) {
  const PackedFormat* f = find_format(type);
  FUCINA_CHECK(f != nullptr, Unsupported, "[pack] no packed kernels for {}", codec_traits(type).name);
  return *f;
}

bool q8_0_paired(QuantType type) { return codec_traits(type).vec_dot_type == QuantType::Q8_0; }

constexpr std::size_t kRegionBytes = std::size_t{32} << 20;

}  // namespace

std::shared_ptr<std::byte> PackedArena::allocate(std::size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes > kRegionBytes / 4) return aligned_block(bytes, kHugePageBytes);  // big: a region of its own
  if (region_ == nullptr || used_ + bytes > size_) {
    region_ = aligned_block(kRegionBytes, kHugePageBytes);
    used_ = 0;
    size_ = kRegionBytes;
  }
  std::shared_ptr<std::byte> part(region_, region_.get() + used_);  // shares the region's lifetime
  used_ += bytes;
  return part;
}

PackedMatrix::PackedMatrix(QuantType type, std::int64_t rows, std::int64_t cols, PackedArena* arena)
    : type_(type), rows_(rows), cols_(cols), group_bytes_(format_of(type).group_bytes(cols)) {
  FUCINA_CHECK(rows > 0 && packable(type, cols), InvalidArgument, "[pack] cannot pack {} rows of {} {} elements", rows,
               cols, codec_traits(type).name);
  FUCINA_ASSERT(group_bytes_ % 64 == 0);
  const auto total = static_cast<std::size_t>(groups() * group_bytes_);
  data_ = arena != nullptr ? arena->allocate(total) : aligned_block(total, 64);
}

bool packable(QuantType type, std::int64_t cols) {
  return find_format(type) != nullptr && cols > 0 && cols % codec_traits(type).block_size == 0;
}

PackedMatrix pack_matrix(QuantType type, const std::byte* data, std::int64_t rows, std::int64_t cols,
                         std::int64_t row_bytes, ThreadPool* pool, PackedArena* arena) {
  const PackedFormat& f = format_of(type);
  FUCINA_CHECK(row_bytes == quant::row_bytes(type, cols), InvalidArgument, "[pack] {} rows of {} elements are {} bytes, not {}",
               codec_traits(type).name, cols, quant::row_bytes(type, cols), row_bytes);
  PackedMatrix m(type, rows, cols, arena);
  auto pack = [&](std::int64_t g) {
    const std::byte* src[kPackRows];
    for (int r = 0; r < kPackRows; ++r) {
      const std::int64_t row = g * kPackRows + r;
      src[r] = row < rows ? data + row * row_bytes : nullptr;
    }
    f.pack_group(src, cols, m.mutable_group(g));
  };
  if (pool != nullptr) {
    pool->parallel_for(m.groups(), pack);
  } else {
    for (std::int64_t g = 0; g < m.groups(); ++g) pack(g);
  }
  return m;
}

std::int64_t packed_act_bytes(QuantType type, std::int64_t cols) {
  if (q8_0_paired(type)) return cols / 32 * static_cast<std::int64_t>(sizeof(detail::PackedActQ8));
  return row_bytes(QuantType::Q8_K, cols);
}

namespace {

// One 32-value block: ggml's Q8_0 activation encoding, the scale widened to f32, the int8 sum.
void encode_q8_block(const float* x, detail::PackedActQ8& out) {
  BlockQ8_0 tmp;
  quantize_row_activation(QuantType::Q8_0, x, &tmp, 32);
  out.d = fp16_to_fp32(tmp.d);
  int s = 0;
  for (int i = 0; i < 32; ++i) {
    out.q[i] = tmp.qs[i];
    s += tmp.qs[i];
  }
  out.sum = s;
}

// encode_q8_block over a row, 16 lanes at a time: |x| max, x·(127/amax) rounded to nearest
// even (vcvtps2dq under the default rounding, out of range -> INT_MIN as ggml's
// _mm256_cvtps_epi32), saturated to int8. A block holding NaN goes to the scalar encoder:
// its max fold is order-dependent there. False when the AVX-512 arm is not compiled.
bool encode_q8_row_simd(const float* x, detail::PackedActQ8* out, std::int64_t nb) {
#if FUCINA_ARCH_AVX512
  const __m512 sign = _mm512_set1_ps(-0.f);
  for (std::int64_t b = 0; b < nb; ++b, x += 32) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    if ((_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) != 0) {
      encode_q8_block(x, out[b]);
      continue;
    }
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    out[b].d = fp16_to_fp32(fp32_to_fp16(amax / 127.f));
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
    const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].q), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].q + 16), q1);
    out[b].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
  }
  return true;
#else
  (void)x, (void)out, (void)nb;
  return false;
#endif
}

}  // namespace

void quantize_packed_act_scalar(QuantType type, const float* x, std::byte* dst, std::int64_t cols) {
  if (!q8_0_paired(type)) return quantize_row_q8_K(x, reinterpret_cast<BlockQ8_K*>(dst), cols);
  auto* out = reinterpret_cast<detail::PackedActQ8*>(dst);
  for (std::int64_t b = 0; b < cols / 32; ++b) encode_q8_block(x + b * 32, out[b]);
}

void quantize_packed_act(QuantType type, const float* x, std::byte* dst, std::int64_t cols) {
  if (!q8_0_paired(type)) return quantize_row_activation(QuantType::Q8_K, x, dst, cols);
  if (!encode_q8_row_simd(x, reinterpret_cast<detail::PackedActQ8*>(dst), cols / 32))
    quantize_packed_act_scalar(type, x, dst, cols);
}

PackedKernel packed_kernel(DotArm arm, QuantType type) {
  const PackedFormat* f = find_format(type);
  if (f == nullptr) return nullptr;
  if (arm == DotArm::Scalar) return f->scalar;
  if (arm == DotArm::Avx512Vnni) return f->avx512vnni;
  return nullptr;
}

bool packed_fast_arm_compiled() { return detail::packed_q8_0().avx512vnni != nullptr; }

}  // namespace fucina::quant
