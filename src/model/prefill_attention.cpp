#include "fucina/model/prefill_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fucina/kernels/arch.hpp"
#include "fucina/model/ggml_math.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

constexpr std::int64_t kLanes = 16;         // one AVX-512 vector of f32
constexpr std::int64_t kKeyTile = 64;       // f16 keys/values widened per step: 64·hd floats stay in L1
constexpr std::int64_t kTileRows = 64;      // query rows (tokens·grp) per task: four vectors of lanes
constexpr std::int64_t kMaxRowBlock = 6;    // register tile rows: 6 x 4 vectors = 24 accumulators
constexpr std::int64_t kMaxCols = 4 * kLanes;     // register tile columns

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

// One call's operands; keys/values are <kseq, kvh, hd> views with unit hd stride.
struct Plan {
  const float* q = nullptr;  // contiguous <seq, kvh, grp, hd>
  float* out = nullptr;      // same layout
  const RawTensor* keys = nullptr;
  const RawTensor* values = nullptr;
  std::int64_t n = 0, kvh = 0, grp = 0, hd = 0, n_past = 0, bq = 0;
  float scale = 1.f;
};

struct Scratch {
  std::vector<float> qt;  // [hd][mp]: the tile's query rows, transposed
  std::vector<float> st;  // [kKeyTile][mp]: one key tile's scores, then its weights
  std::vector<float> o;   // [mp][hd]: running outputs
  std::vector<float> kv;  // [kKeyTile][hd]: widened f16 rows
  std::vector<float> m, sum, tile_max;  // [mp]: running max, running sum, this tile's max
  std::vector<std::int32_t> vis;  // [mp]: keys row r sees (0 for padding lanes)
};

// c[r][j] (+)= Σ_k a[r·ra + k·ka] · b[k·ldb + j] for r < rows, j < cols, fused
// multiply-adds in k order as the SIMD arm, so both arms give the same bits.
void gemm_scalar(std::int64_t rows, std::int64_t cols, const float* a, std::int64_t ra, std::int64_t ka, const float* b,
                 std::int64_t ldb, float* c, std::int64_t ldc, std::int64_t kd, bool accumulate) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    if (!accumulate) std::fill(cr, cr + cols, 0.f);
    for (std::int64_t k = 0; k < kd; ++k) {
      const float ar = a[r * ra + k * ka];
      const float* bk = b + k * ldb;
      for (std::int64_t j = 0; j < cols; ++j) cr[j] = std::fma(ar, bk[j], cr[j]);
    }
  }
}

void widen_scalar(const Half* src, std::int64_t stride, std::int64_t rows, std::int64_t hd, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t d = 0; d < hd; ++d) dst[r * hd + d] = half_to_float(src[r * stride + d].bits);
}

#if FUCINA_ARCH_AVX512

template <int R, int NV>
void gemm_tile(const float* a, std::int64_t ra, std::int64_t ka, const float* b, std::int64_t ldb, float* c,
               std::int64_t ldc, std::int64_t kd, bool accumulate) {
  __m512 s[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) s[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * kLanes) : _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kd; ++k) {
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + k * ldb + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * ra + k * ka]);
      for (int v = 0; v < NV; ++v) s[r][v] = _mm512_fmadd_ps(av, bv[v], s[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * ldc + v * kLanes, s[r][v]);
}

template <int R>
void gemm_rows(std::int64_t nv, const float* a, std::int64_t ra, std::int64_t ka, const float* b, std::int64_t ldb,
               float* c, std::int64_t ldc, std::int64_t kd, bool accumulate) {
  switch (nv) {
    case 1: return gemm_tile<R, 1>(a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 2: return gemm_tile<R, 2>(a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 3: return gemm_tile<R, 3>(a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    default: return gemm_tile<R, 4>(a, ra, ka, b, ldb, c, ldc, kd, accumulate);
  }
}

// gemm_scalar for rows <= 6 and cols a multiple of 16, <= 64.
void gemm_avx512(std::int64_t rows, std::int64_t cols, const float* a, std::int64_t ra, std::int64_t ka, const float* b,
                 std::int64_t ldb, float* c, std::int64_t ldc, std::int64_t kd, bool accumulate) {
  FUCINA_ASSERT(rows >= 1 && rows <= kMaxRowBlock && cols % kLanes == 0 && cols >= kLanes && cols <= kMaxCols);
  const std::int64_t nv = cols / kLanes;
  switch (rows) {
    case 1: return gemm_rows<1>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 2: return gemm_rows<2>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 3: return gemm_rows<3>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 4: return gemm_rows<4>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    case 5: return gemm_rows<5>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
    default: return gemm_rows<6>(nv, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
  }
}

void widen_avx512(const Half* src, std::int64_t stride, std::int64_t rows, std::int64_t hd, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t d = 0;
    for (; d + kLanes <= hd; d += kLanes)
      _mm512_storeu_ps(dst + r * hd + d,
                       _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + r * stride + d))));
    for (; d < hd; ++d) dst[r * hd + d] = half_to_float(src[r * stride + d].bits);
  }
}

#endif  // FUCINA_ARCH_AVX512

// The kernels of one arm; Simd needs hd % 16 == 0.
template <bool Simd>
struct Arm {
  static void gemm(std::int64_t rows, std::int64_t cols, const float* a, std::int64_t ra, std::int64_t ka,
                   const float* b, std::int64_t ldb, float* c, std::int64_t ldc, std::int64_t kd, bool accumulate) {
#if FUCINA_ARCH_AVX512
    if constexpr (Simd) return gemm_avx512(rows, cols, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
#endif
    gemm_scalar(rows, cols, a, ra, ka, b, ldb, c, ldc, kd, accumulate);
  }
  static void widen(const Half* src, std::int64_t stride, std::int64_t rows, std::int64_t hd, float* dst) {
#if FUCINA_ARCH_AVX512
    if constexpr (Simd) return widen_avx512(src, stride, rows, hd, dst);
#endif
    widen_scalar(src, stride, rows, hd, dst);
  }
};

// Rows [k0, k0 + kn) of kv head h as f32 rows: the cache itself (f32) or a widened copy.
template <bool Simd>
const float* kv_rows(const RawTensor& t, std::int64_t h, std::int64_t k0, std::int64_t kn, std::int64_t hd,
                     std::vector<float>& buf, std::int64_t& ld) {
  const std::int64_t off = k0 * t.strides[0] + h * t.strides[1];
  if (t.dtype == DType::f32) {
    ld = t.strides[0];
    return t.data<float>() + off;
  }
  ld = hd;
  buf.resize(static_cast<std::size_t>(kn * hd));
  Arm<Simd>::widen(t.data<Half>() + off, t.strides[0], kn, hd, buf.data());
  return buf.data();
}

// One key tile's online-softmax step for every row (Note [prefill attention]): scores
// st[c][r] (c < kn) become weights exp(s - M) (0 for keys row r does not see), the running
// max M, sum S and output rows are updated as ggml's tiled path does.
void softmax_tile(Scratch& s, std::int64_t mp, std::int64_t m, std::int64_t k0, std::int64_t kn, std::int64_t hd,
                  float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float* st = s.st.data();
  std::fill(s.tile_max.begin(), s.tile_max.end(), kNegInf);
  for (std::int64_t c = 0; c < kn; ++c)
    for (std::int64_t r = 0; r < mp; ++r) {
      float& x = st[c * mp + r];
      x = k0 + c < s.vis[static_cast<std::size_t>(r)] ? x * scale : kNegInf;
      s.tile_max[static_cast<std::size_t>(r)] = std::max(s.tile_max[static_cast<std::size_t>(r)], x);
    }
  for (std::int64_t r = 0; r < m; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    const float m_old = s.m[ur], m_new = std::max(m_old, s.tile_max[ur]);
    if (m_new > m_old) {  // a new max rescales what was summed so far (libm expf, as ggml)
      const float ms = std::exp(m_old - m_new);
      for (std::int64_t d = 0; d < hd; ++d) s.o[static_cast<std::size_t>(r * hd + d)] *= ms;
      s.sum[ur] *= ms;
      s.m[ur] = m_new;
    }
  }
  for (std::int64_t c = 0; c < kn; ++c)
    for (std::int64_t r = 0; r < mp; ++r) st[c * mp + r] -= s.m[static_cast<std::size_t>(r)];
  ggml_vexpf_rows(st, st, kn * mp);  // exp(-inf) = 0 for unseen keys
  for (std::int64_t r = 0; r < m; ++r) {  // ggml_vec_soft_max_f32's sum: 16-key folds, in double
    double total = 0;
    float block[16];
    for (std::int64_t c0 = 0; c0 < kn; c0 += 16) {
      for (std::int64_t l = 0; l < 16; ++l) block[l] = c0 + l < kn ? st[(c0 + l) * mp + r] : 0.f;
      total += static_cast<double>(fold16(block));
    }
    s.sum[static_cast<std::size_t>(r)] = static_cast<float>(static_cast<double>(s.sum[static_cast<std::size_t>(r)]) + total);
  }
}

// Attention of query tile `tile` (rows i0..i1) against kv head h.
template <bool Simd>
void run_task(const Plan& p, std::int64_t h, std::int64_t tile, Scratch& s) {
  using A = Arm<Simd>;
  const std::int64_t hd = p.hd, grp = p.grp;
  const std::int64_t i0 = tile * p.bq, i1 = std::min(p.n, i0 + p.bq);
  const std::int64_t m = (i1 - i0) * grp, mp = round_up(m, kLanes), kend = p.n_past + i1;
  const std::int64_t q_row = p.kvh * grp * hd;  // between tokens
  s.qt.assign(static_cast<std::size_t>(hd * mp), 0.f);
  s.vis.assign(static_cast<std::size_t>(mp), 0);
  for (std::int64_t r = 0; r < m; ++r) {
    const float* src = p.q + (i0 + r / grp) * q_row + (h * grp + r % grp) * hd;
    for (std::int64_t d = 0; d < hd; ++d) s.qt[static_cast<std::size_t>(d * mp + r)] = src[d];
    s.vis[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(p.n_past + i0 + r / grp + 1);
  }
  s.st.resize(static_cast<std::size_t>(kKeyTile * mp));
  s.o.assign(static_cast<std::size_t>(mp * hd), 0.f);
  s.m.assign(static_cast<std::size_t>(mp), -std::numeric_limits<float>::infinity());
  s.sum.assign(static_cast<std::size_t>(mp), 0.f);
  s.tile_max.resize(static_cast<std::size_t>(mp));
  float* st = s.st.data();
  std::int64_t ld = 0;

  for (std::int64_t k0 = 0; k0 < kend; k0 += kKeyTile) {
    const std::int64_t kn = std::min(kKeyTile, kend - k0);
    // Scores st[c][r] = q_r·k_{k0+c}, each a fused multiply-add chain over hd from 0.
    const float* kb = kv_rows<Simd>(*p.keys, h, k0, kn, hd, s.kv, ld);
    for (std::int64_t c0 = 0; c0 < kn; c0 += kMaxRowBlock) {
      const std::int64_t rows = std::min(kMaxRowBlock, kn - c0), c = k0 + c0;
      const std::int64_t first = std::max<std::int64_t>(0, (c - p.n_past - i0) * grp);  // vis[first] > c
      for (std::int64_t col = first / kLanes * kLanes; col < mp; col += kMaxCols)
        A::gemm(rows, std::min(kMaxCols, mp - col), kb + c0 * ld, ld, 1, s.qt.data() + col, mp, st + c0 * mp + col, mp,
                hd, false);
    }
    softmax_tile(s, mp, m, k0, kn, hd, p.scale);
    // o[r] += Σ_c w[c][r]·v_c, a fused multiply-add chain over the keys in order (weights
    // are 0 past each row's own end, so a row block stops at its last row's end).
    const float* vb = kv_rows<Simd>(*p.values, h, k0, kn, hd, s.kv, ld);
    for (std::int64_t r0 = 0; r0 < m; r0 += kMaxRowBlock) {
      const std::int64_t rows = std::min(kMaxRowBlock, m - r0);
      const std::int64_t lim = s.vis[static_cast<std::size_t>(r0 + rows - 1)];
      if (lim <= k0) continue;
      for (std::int64_t d0 = 0; d0 < hd; d0 += kMaxCols)
        A::gemm(rows, std::min(kMaxCols, hd - d0), st + r0, 1, mp, vb + d0, ld, s.o.data() + r0 * hd + d0, hd,
                std::min(kn, lim - k0), true);
    }
  }
  for (std::int64_t r = 0; r < m; ++r) {
    const float sum = s.sum[static_cast<std::size_t>(r)], inv = sum == 0.f ? 0.f : 1.f / sum;
    float* dst = p.out + (i0 + r / grp) * q_row + (h * grp + r % grp) * hd;
    for (std::int64_t d = 0; d < hd; ++d) dst[d] = s.o[static_cast<std::size_t>(r * hd + d)] * inv;
  }
}

Tensor<"seq", "kvh", "grp", "hd"> run(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in, const RawTensor& keys,
                                      const RawTensor& values, std::int64_t n_past, float scale, bool simd) {
  const auto q = contiguous(ctx, q_in);
  const std::int64_t n = q.size<"seq">(), kvh = q.size<"kvh">(), grp = q.size<"grp">(), hd = q.size<"hd">();
  FUCINA_CHECK(keys.rank == 3 && values.rank == 3, InvalidShape, "[prefill_attention] keys/values must be <kseq, kvh, hd>");
  FUCINA_CHECK(keys.dtype == values.dtype && (keys.dtype == DType::f16 || keys.dtype == DType::f32), InvalidArgument,
               "[prefill_attention] keys and values must both be f16 or both f32");
  const std::int64_t n_kv = keys.shape[0];
  FUCINA_CHECK(keys.shape[1] == kvh && keys.shape[2] == hd && values.shape[1] == kvh && values.shape[2] == hd &&
                   values.shape[0] == n_kv,
               ShapeMismatch, "[prefill_attention] q has {} kv heads of {} dims, keys {} of {}, values {} of {}", kvh, hd,
               keys.shape[1], keys.shape[2], values.shape[1], values.shape[2]);
  FUCINA_CHECK(n_past >= 0 && n_past + n <= n_kv, InvalidArgument, "[prefill_attention] {} past + {} new > {} keys",
               n_past, n, n_kv);
  FUCINA_CHECK(keys.strides[2] == 1 && values.strides[2] == 1, UnsupportedView,
               "[prefill_attention] keys/values need contiguous head dims");
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, {n, kvh, grp, hd});
  if (out.numel() == 0) return out;
  Plan p;
  p.q = q.data().data();
  p.out = out.mutable_data().data();
  p.keys = &keys;
  p.values = &values;
  p.n = n, p.kvh = kvh, p.grp = grp, p.hd = hd, p.n_past = n_past, p.scale = scale;
  p.bq = std::max<std::int64_t>(1, kTileRows / grp);  // ~64 query rows per task
  const std::int64_t tiles = (n + p.bq - 1) / p.bq;
#if FUCINA_ARCH_AVX512
  simd = simd && hd % kLanes == 0;
#else
  simd = false;
#endif
  // Head by head, so neighbouring tasks reread the same K/V rows from cache; within a head
  // later tiles (more keys) first, so the last tasks are short ones.
  ctx.pool().parallel_for(tiles * kvh, [&](std::int64_t t) {
    thread_local Scratch s;
    const std::int64_t h = t / tiles, tile = tiles - 1 - t % tiles;
    if (simd)
      run_task<true>(p, h, tile, s);
    else
      run_task<false>(p, h, tile, s);
  });
  return out;
}

}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> prefill_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                    const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                    const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                    std::int64_t n_past, float scale) {
  return run(ctx, q, keys.raw(), values.raw(), n_past, scale, true);
}

Tensor<"seq", "kvh", "grp", "hd"> prefill_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                    const Tensor<"kseq", "kvh", "hd">& keys,
                                                    const Tensor<"kseq", "kvh", "hd">& values, std::int64_t n_past,
                                                    float scale) {
  return run(ctx, q, keys.raw(), values.raw(), n_past, scale, true);
}

namespace detail {

Tensor<"seq", "kvh", "grp", "hd"> prefill_attention_scalar(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                           const RawTensor& keys, const RawTensor& values,
                                                           std::int64_t n_past, float scale) {
  return run(ctx, q, keys, values, n_past, scale, false);
}

}  // namespace detail

}  // namespace fucina::model
