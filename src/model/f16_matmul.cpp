#include "fucina/model/f16_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "fucina/core/error.hpp"
#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

// GCC's _mm512_reduce_add_ps: halves, quarters, then (0+2)+(1+3).
void round_span(const float* src, float* dst, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_AVX512
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
  for (; i < n; ++i) dst[i] = half_to_float(float_to_half(src[i]));
}

float fold16(const float* l) {
  float t3[8], t6[4];
  for (int i = 0; i < 8; ++i) t3[i] = l[8 + i] + l[i];
  for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
  return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

}  // namespace

void round_to_f16(float* x, std::int64_t n) { round_span(x, x, n); }

void round_to_f16(ThreadPool& pool, const float* src, float* dst, std::int64_t n) {
  pool.parallel_range(n, 1 << 16, [&](std::int64_t b, std::int64_t e) { round_span(src + b, dst + b, e - b); });
}

float dot_f16_scalar(const Half* w, const float* x, std::int64_t k, F16DotOrder order) {
  if (order == F16DotOrder::tiled && k % 16 == 0) {
    float acc[16] = {};
    for (std::int64_t i = 0; i < k; i += 16)
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(half_to_float(w[i + l].bits), x[i + l], acc[l]);
    return fold16(acc);
  }
  float acc[4][16] = {};
  const std::int64_t np = k & ~std::int64_t{63};
  for (std::int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 16; ++l)
        acc[j][l] = std::fma(half_to_float(w[i + 16 * j + l].bits), x[i + 16 * j + l], acc[j][l]);
  for (int l = 0; l < 16; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
    acc[0][l] += acc[1][l];
  }
  double s = fold16(acc[0]);
  for (std::int64_t i = np; i < k; ++i) s += static_cast<double>(half_to_float(w[i].bits) * x[i]);
  return static_cast<float>(s);
}

#if FUCINA_ARCH_AVX512
namespace {

__m512 load_f16x16(const Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// ggml_vec_dot_f16's lanes over the first np (a multiple of 64) elements: four accumulators
// over 64-blocks, combined (0+2) + (1+3); fold16 of the result is the f32 part of the dot.
// Prefetch (decode, rows streamed from DRAM): two prefetches per 64-element step keep the
// requests for the bytes kStreamAhead ahead evenly spaced. Against the former burst of a
// whole row's prefetches 2 KiB ahead: +8% Qwen3-0.6B F16 decode (in-process A/B, alternating
// 32-token windows); 8 KiB ties 4 KiB, 2 KiB and 12-16 KiB are 1-3% slower.
constexpr std::int64_t kStreamAhead = 4096;
template <bool Prefetch = false>
__m512 vec_order_lanes(const Half* w, const float* x, std::int64_t np) {
  const char* pf = reinterpret_cast<const char*>(w) + kStreamAhead;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < np; i += 64) {
    if constexpr (Prefetch) {
      _mm_prefetch(pf + 2 * i, _MM_HINT_NTA);
      _mm_prefetch(pf + 2 * i + 64, _MM_HINT_NTA);
    }
    a0 = _mm512_fmadd_ps(load_f16x16(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load_f16x16(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load_f16x16(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load_f16x16(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

// vec_order_lanes of one w against two x, each w chunk widened once.
inline void vec_order_lanes2(const Half* w, const float* x0, const float* x1, std::int64_t np, __m512& out0,
                             __m512& out1) {
  __m512 a[2][4];
  for (auto& q : a)
    for (auto& l : q) l = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < np; i += 64)
    for (int l = 0; l < 4; ++l) {
      const __m512 wl = load_f16x16(w + i + 16 * l);
      a[0][l] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x0 + i + 16 * l), a[0][l]);
      a[1][l] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x1 + i + 16 * l), a[1][l]);
    }
  out0 = _mm512_add_ps(_mm512_add_ps(a[0][0], a[0][2]), _mm512_add_ps(a[0][1], a[0][3]));
  out1 = _mm512_add_ps(_mm512_add_ps(a[1][0], a[1][2]), _mm512_add_ps(a[1][1], a[1][3]));
}

}  // namespace
#endif

float dot_f16(const Half* w, const float* x, std::int64_t k, F16DotOrder order) {
#if FUCINA_ARCH_AVX512
  alignas(64) float lanes[16];
  if (order == F16DotOrder::tiled && k % 16 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < k; i += 16) acc = _mm512_fmadd_ps(load_f16x16(w + i), _mm512_loadu_ps(x + i), acc);
    _mm512_store_ps(lanes, acc);
    return fold16(lanes);
  }
  const std::int64_t np = k & ~std::int64_t{63};
  _mm512_store_ps(lanes, vec_order_lanes(w, x, np));
  double s = fold16(lanes);
  for (std::int64_t i = np; i < k; ++i) s += static_cast<double>(half_to_float(w[i].bits) * x[i]);
  return static_cast<float>(s);
#else
  return dot_f16_scalar(w, x, k, order);
#endif
}

namespace {

#if FUCINA_ARCH_AVX512
// fold16 of 16 accumulators at once: every step adds the same pairs fold16 adds (halves,
// then quarters, then (0+2), (1+3), then their sum), two accumulators per instruction.
// out[a] = fold16(v[a]).
inline void fold16x16(const __m512* v, float* out) {
  __m512 p[8], q[4], r[2];
  for (int k = 0; k < 8; ++k)  // lanes 0-7: v[2k]'s halves summed, 8-15: v[2k+1]'s
    p[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44), _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
  for (int m = 0; m < 4; ++m)  // quarter j: accumulator 4m + j's four quarter sums
    q[m] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0x88), _mm512_shuffle_f32x4(p[2 * m], p[2 * m + 1], 0xDD));
  for (int n = 0; n < 2; ++n)  // quarter j: (0+2), (1+3) of accumulators 8n + j and 8n + 4 + j
    r[n] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * n], q[2 * n + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(q[2 * n], q[2 * n + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4j + t holds accumulator 4t + j: one permute puts accumulator a in lane a.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, f));
}

// An RM x RN tile of tiled-order dots: x rows i (f32, already f16-rounded) against w rows j
// (f16), one 16-lane accumulator per output over k ascending, folded like dot_f16 --
// so every output has exactly the bits of dot_f16(w_j, x_i, k, tiled) (Note [f16 summation
// order]) while each weight vector load serves RM rows and each x load RN columns.
template <int RM, int RN>
void tile_tiled(const float* x, std::int64_t ldx, const Half* w, std::int64_t ldw, std::int64_t k, float* y,
                std::int64_t ldy) {
  __m512 acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < k; p += 16) {
    __m512 b[RN];
    for (int j = 0; j < RN; ++j)
      b[j] = load_f16x16(w + j * ldw + p);
    for (int i = 0; i < RM; ++i) {
      const __m512 a = _mm512_loadu_ps(x + i * ldx + p);
      for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_fmadd_ps(b[j], a, acc[i][j]);
    }
  }
  // Fold 16 accumulators at a time, vectorized with fold16's exact pairings.
  constexpr int kN = RM * RN, kGroups = (kN + 15) / 16;
  __m512 v[kGroups * 16];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) v[i * RN + j] = acc[i][j];
  for (int a = kN; a < kGroups * 16; ++a) v[a] = _mm512_setzero_ps();
  alignas(64) float sums[kGroups * 16];
  for (int g = 0; g < kGroups; ++g) fold16x16(v + 16 * g, sums + 16 * g);
  for (int i = 0; i < RM; ++i) std::memcpy(y + i * ldy, sums + i * RN, sizeof(float) * RN);
}

constexpr int kTileRows = 4, kTileCols = 6;

template <int RM, int... RNs>
void tile_cols(int rn, const float* x, std::int64_t ldx, const Half* w, std::int64_t ldw, std::int64_t k, float* y,
               std::int64_t ldy, std::integer_sequence<int, RNs...>) {
  (void)((rn == RNs + 1 ? (tile_tiled<RM, RNs + 1>(x, ldx, w, ldw, k, y, ldy), true) : false) || ...);
}

template <int... RMs>
void tile_any(int rm, int rn, const float* x, std::int64_t ldx, const Half* w, std::int64_t ldw, std::int64_t k,
              float* y, std::int64_t ldy, std::integer_sequence<int, RMs...>) {
  (void)((rm == RMs + 1 ? (tile_cols<RMs + 1>(rn, x, ldx, w, ldw, k, y, ldy,
                                              std::make_integer_sequence<int, kTileCols>{}),
                           true)
                        : false) ||
         ...);
}
#endif

// Rows [r0, r1) of x against weight rows [o0, o1), tiled order, into y.
void block_tiled(const float* x, std::int64_t r0, std::int64_t r1, std::int64_t k, const Half* w, std::int64_t ldw,
                 std::int64_t o0, std::int64_t o1, std::int64_t n_out, float* y) {
#if FUCINA_ARCH_AVX512
  for (std::int64_t o = o0; o < o1; o += kTileCols) {
    const int rn = static_cast<int>(std::min<std::int64_t>(kTileCols, o1 - o));
    for (std::int64_t r = r0; r < r1; r += kTileRows) {
      const int rm = static_cast<int>(std::min<std::int64_t>(kTileRows, r1 - r));
      tile_any(rm, rn, x + r * k, k, w + o * ldw, ldw, k, y + r * n_out + o, n_out,
               std::make_integer_sequence<int, kTileRows>{});
    }
  }
#else
  for (std::int64_t o = o0; o < o1; ++o)
    for (std::int64_t r = r0; r < r1; ++r) y[r * n_out + o] = dot_f16(w + o * ldw, x + r * k, k, F16DotOrder::tiled);
#endif
}

}  // namespace

void matmul_f16(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const Half* w,
                std::int64_t w_stride, std::int64_t n_out, float* y, F16DotOrder order) {
  if (order == F16DotOrder::tiled && k % 16 == 0) {
    // Tasks: 64 x rows (in L2) times 48 weight rows (in L1 per 6-row tile), weight-major so
    // a task's weights are read once per row block.
    constexpr std::int64_t kRowBlock = 64, kOutBlock = 48;
    const std::int64_t rb = (n_rows + kRowBlock - 1) / kRowBlock, ob = (n_out + kOutBlock - 1) / kOutBlock;
    // One pool task per block, claimed dynamically: a core slowed by the VM's neighbours
    // leaves its share to the other instead of making it wait at the join.
    pool.parallel_for(rb * ob, [&](std::int64_t t) {
      const std::int64_t o0 = (t / rb) * kOutBlock, r0 = (t % rb) * kRowBlock;
      block_tiled(x, r0, std::min(n_rows, r0 + kRowBlock), k, w, w_stride, o0, std::min(n_out, o0 + kOutBlock), n_out, y);
    });
    return;
  }
  // Small jobs run inline: waking workers costs more than a few thousand MACs.
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, k * n_rows));
#if FUCINA_ARCH_AVX512
  if (n_rows == 1 && order == F16DotOrder::vec && k % 64 == 0) {
    // Decode: one x row, rows of w streamed once; 16 rows folded together (bit for bit
    // dot_f16's fold) so the per-row tail is a few shuffles.
    const Half* w_end = w + (n_out - 1) * w_stride + k;
    pool.parallel_range(n_out, std::max<std::int64_t>(16, grain), [&](std::int64_t b, std::int64_t e) {
      __m512 v[16];
      std::int64_t o = b;
      for (; o + 16 <= e; o += 16) {
        const bool ahead = reinterpret_cast<const char*>(w + (o + 15) * w_stride + k) + kStreamAhead <=
                           reinterpret_cast<const char*>(w_end);
        for (int r = 0; r < 16; ++r)
          v[r] = ahead ? vec_order_lanes<true>(w + (o + r) * w_stride, x, k)
                       : vec_order_lanes(w + (o + r) * w_stride, x, k);
        fold16x16(v, y + o);
      }
      for (; o < e; ++o) y[o] = dot_f16(w + o * w_stride, x, k, order);
    });
    return;
  }
#endif
  pool.parallel_range(n_out, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o)
      for (std::int64_t r = 0; r < n_rows; ++r) y[r * n_out + o] = dot_f16(w + o * w_stride, x + r * k, k, order);
  });
}

void dot_f16_vec_rows(const Half* w, std::int64_t w_stride, const float* const* x, int n_x, std::int64_t k, std::int64_t n,
                      float* const* out) {
  FUCINA_ASSERT(n_x >= 1 && n_x <= kMaxVecRowQueries);
  std::int64_t j = 0;
#if FUCINA_ARCH_AVX512
  if (k % 64 == 0) {  // no double tail: the folded f32 sum is the result
    for (; j + 16 <= n; j += 16) {
      __m512 v[kMaxVecRowQueries][16];
      if (n_x == 2)  // each key row widened once for both queries
        for (int r = 0; r < 16; ++r) vec_order_lanes2(w + (j + r) * w_stride, x[0], x[1], k, v[0][r], v[1][r]);
      else
        for (int r = 0; r < 16; ++r) v[0][r] = vec_order_lanes(w + (j + r) * w_stride, x[0], k);
      for (int q = 0; q < n_x; ++q) fold16x16(v[q], out[q] + j);
    }
  }
#endif
  for (; j < n; ++j)
    for (int q = 0; q < n_x; ++q) out[q][j] = dot_f16(w + j * w_stride, x[q], k, F16DotOrder::vec);
}

}  // namespace fucina::model
