#include "fucina/model/f16_matmul.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/model/ggml_math.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

void round_span(const float* src, float* dst, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_AVX512
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
  for (; i < n; ++i) dst[i] = half_to_float(float_to_half(src[i]));
}


}  // namespace

void round_to_f16(float* x, std::int64_t n) { round_span(x, x, n); }

void round_to_f16(ThreadPool& pool, const float* src, float* dst, std::int64_t n) {
  pool.parallel_range(n, 1 << 16, [&](std::int64_t b, std::int64_t e) { round_span(src + b, dst + b, e - b); });
}

namespace {

inline float widen(Half h) { return half_to_float(h.bits); }
inline float widen(float f) { return f; }

// The elements past ggml_vec_dot's 64-blocks, added to the folded f32 lanes `folded`:
// ggml_vec_dot_f16 sums them in double (each f16 x f16 product is exact in f32);
// ggml_vec_dot_f32 in f32, in order, as GCC compiled its tail loop: products 8 at a time
// (a multiply, then an add), the last (k - np) % 8 in a scalar epilogue it contracts to
// FMAs. Checked against libggml-cpu's vec_dot for tails of 3 to 44 elements.
float vec_tail(double folded, const Half* w, const float* x, std::int64_t np, std::int64_t k) {
  for (std::int64_t i = np; i < k; ++i) folded += static_cast<double>(widen(w[i]) * x[i]);
  return static_cast<float>(folded);
}
float vec_tail(float folded, const float* w, const float* x, std::int64_t np, std::int64_t k) {
  const std::int64_t fused_from = np + ((k - np) & ~std::int64_t{7});
  std::int64_t i = np;
  for (; i < fused_from; ++i) folded += w[i] * x[i];
  for (; i < k; ++i) folded = std::fma(w[i], x[i], folded);
  return folded;
}

template <typename W>
float dot_scalar(const W* w, const float* x, std::int64_t k, GgmlOrder order) {
  if (order == GgmlOrder::tiled && k % 16 == 0) {
    float acc[16] = {};
    for (std::int64_t i = 0; i < k; i += 16)
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(widen(w[i + l]), x[i + l], acc[l]);
    return fold16(acc);
  }
  float acc[4][16] = {};
  const std::int64_t np = k & ~std::int64_t{63};
  for (std::int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 16; ++l) acc[j][l] = std::fma(widen(w[i + 16 * j + l]), x[i + 16 * j + l], acc[j][l]);
  for (int l = 0; l < 16; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
    acc[0][l] += acc[1][l];
  }
  return vec_tail(fold16(acc[0]), w, x, np, k);
}

}  // namespace

float dot_f16_scalar(const Half* w, const float* x, std::int64_t k, GgmlOrder order) { return dot_scalar(w, x, k, order); }
float dot_f32_scalar(const float* w, const float* x, std::int64_t k, GgmlOrder order) { return dot_scalar(w, x, k, order); }

#if FUCINA_ARCH_AVX512
namespace {

// 16 weights widened to f32 lanes.
__m512 load16(const Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
__m512 load16(const float* p) { return _mm512_loadu_ps(p); }

// ggml_vec_dot_f16's lanes over the first np (a multiple of 64) elements: four accumulators
// over 64-blocks, combined (0+2) + (1+3); fold16 of the result is the f32 part of the dot.
// Prefetch (decode, rows streamed from DRAM): two prefetches per 64-element step keep the
// requests for the bytes kStreamAhead ahead evenly spaced. Against the former burst of a
// whole row's prefetches 2 KiB ahead: +8% Qwen3-0.6B F16 decode (in-process A/B, alternating
// 32-token windows); 8 KiB ties 4 KiB, 2 KiB and 12-16 KiB are 1-3% slower.
constexpr std::int64_t kStreamAhead = 4096;
template <bool Prefetch = false, typename W>
__m512 vec_order_lanes(const W* w, const float* x, std::int64_t np) {
  const char* pf = reinterpret_cast<const char*>(w) + kStreamAhead;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < np; i += 64) {
    if constexpr (Prefetch) {
      for (std::size_t b = 0; b < 64 * sizeof(W); b += 64) _mm_prefetch(pf + i * sizeof(W) + b, _MM_HINT_NTA);
    }
    a0 = _mm512_fmadd_ps(load16(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load16(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load16(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load16(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

// vec_order_lanes of one w against two x, each w chunk widened once.
template <typename W>
inline void vec_order_lanes2(const W* w, const float* x0, const float* x1, std::int64_t np, __m512& out0,
                             __m512& out1) {
  __m512 a[2][4];
  for (auto& q : a)
    for (auto& l : q) l = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < np; i += 64)
    for (int l = 0; l < 4; ++l) {
      const __m512 wl = load16(w + i + 16 * l);
      a[0][l] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x0 + i + 16 * l), a[0][l]);
      a[1][l] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x1 + i + 16 * l), a[1][l]);
    }
  out0 = _mm512_add_ps(_mm512_add_ps(a[0][0], a[0][2]), _mm512_add_ps(a[0][1], a[0][3]));
  out1 = _mm512_add_ps(_mm512_add_ps(a[1][0], a[1][2]), _mm512_add_ps(a[1][1], a[1][3]));
}

}  // namespace
#endif

namespace {
template <typename W>
float dot_ggml(const W* w, const float* x, std::int64_t k, GgmlOrder order) {
#if FUCINA_ARCH_AVX512
  alignas(64) float lanes[16];
  if (order == GgmlOrder::tiled && k % 16 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < k; i += 16) acc = _mm512_fmadd_ps(load16(w + i), _mm512_loadu_ps(x + i), acc);
    _mm512_store_ps(lanes, acc);
    return fold16(lanes);
  }
  const std::int64_t np = k & ~std::int64_t{63};
  _mm512_store_ps(lanes, vec_order_lanes(w, x, np));
  return vec_tail(fold16(lanes), w, x, np, k);
#else
  return dot_scalar(w, x, k, order);
#endif
}
}  // namespace

float dot_f16(const Half* w, const float* x, std::int64_t k, GgmlOrder order) { return dot_ggml(w, x, k, order); }
float dot_f32(const float* w, const float* x, std::int64_t k, GgmlOrder order) { return dot_ggml(w, x, k, order); }

namespace {

// Register tiles of dots: up to kTileRows rows of x by up to kTileCols weight rows.
constexpr int kTileRows = 4, kTileCols = 6;

#if FUCINA_ARCH_AVX512
// fold16 of 16 accumulators at once: every step adds the same pairs fold16 adds (halves,
// then quarters, then (0+2), (1+3), then their sum), two accumulators per instruction.
// out[a] = fold16(v[a]). Inlined into each tile: called, with the tile's sums stored for it,
// it took 20% of a 17 x 768 x 256 product (inlined: tiled +10-20%, vec +5-10% at k <= 768).
[[gnu::always_inline]] inline void fold16x16(const __m512* v, float* out) {
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

// An RM x RN tile of dots: x rows i (f32, already f16-rounded) against w rows j, each output
// with exactly the bits of dot_ggml(w_j, x_i, k, Order) while each weight vector load serves
// RM rows and each x load RN columns.
//   tiled (Note [f16 summation order]): one 16-lane accumulator per output over k ascending.
//   vec (one-row arithmetic's batched rows, Note [One-row arithmetic]): vec_order_lanes's four
//     chains, each an ascending sum over every 64th group of 16, run one after the other
//     over the tile (the tile's weights are in L1 after the first) and combined as it does,
//     (c0 + c2) + (c1 + c3).
// Then fold16 of each output's lanes.
//
// Loads bound the passes here (Zen 5 VM): 24 independent FMAs run at the FMA peak (12
// cycles) beside 7-8 vector loads (512-bit x loads and f16 widening loads count alike),
// take ~15 cycles beside 9-14 and ~20 beside 17-20. A 4 x 6 pass has 10 per 24 FMAs. At
// k = 256 the vec order runs 75-85% of the tiled order's speed: its passes are 4 steps
// long, and it adds a store and a load per output and chain for the chain sums (the four
// chains summed into one set of sums, wrong bits, timing only: 17 rows 137 -> 163 GFLOP/s,
// 9 rows 143 -> 153, 5 rows no change; tiled 165-180). 4 x 3 tiles running chains 0 + 2,
// then 1 + 3, every sum in registers (14 loads per 24 FMAs): 0-8% slower at k = 256, 25%
// at 17 x 256 x 768. Each chain's sums stored once explicitly (GCC moves them through the
// stack several times between passes): no change.
//
// A few rows' weights come from DRAM with little compute to hide the latency (and six short
// row streams the hardware prefetcher trains on poorly), so the first row tile of each
// column tile prefetches the same places of the weight rows whole tiles ahead (at least
// kTileStreamAhead bytes: the next tiles' lines, each requested once), one line per 64
// bytes read, spread evenly over the tile's passes. The former distance along each row
// (8 KiB past the read) fell inside the tile itself at k >= 1024, leaving a third of the
// lines at k = 1024 to demand misses. 8 rows through four Qwen3-0.6B layers (f16layers, one
// thread, CPU time, quiet): tiled 98-99 -> 150-155 GFLOP/s, vec 80-82 -> 106-107 (with the
// vec order's prefetches all in its first pass, 84-85: too many lines asked for at once);
// 8 x 151936 x 512 tiled 101 -> 166-172. 4 and 8 KiB tie, 16 KiB is 3-7% slower,
// _MM_HINT_T0 5-10% slower than NTA.
constexpr std::int64_t kTileStreamAhead = 8192;

// acc[i * RN + j] += the products of x row i and w row j over p = from, from + Step, ... < k
// (16 elements each). The loops over i and j are unrolled by pragma: left to itself GCC 12
// kept the accumulators in a stack array and stored all 24 on every step (half the speed).
template <int RM, int RN, std::int64_t Step, bool Prefetch, typename W>
inline void tile_pass(const float* x, std::int64_t ldx, const W* w, std::int64_t ldw, std::int64_t from,
                      std::int64_t k, std::int64_t ahead, std::int64_t pf_from, __m512* acc) {
  for (std::int64_t p = from; p < k; p += Step) {
    __m512 b[RN];
    if constexpr (Prefetch) {
      const std::int64_t pos = pf_from + (p - from) / (Step / 16);
      if (pos * static_cast<std::int64_t>(sizeof(W)) % 64 == 0) {
#pragma GCC unroll 8
        for (int j = 0; j < RN; ++j) _mm_prefetch(reinterpret_cast<const char*>(w + j * ldw + pos + ahead), _MM_HINT_NTA);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) b[j] = load16(w + j * ldw + p);
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const __m512 a = _mm512_loadu_ps(x + i * ldx + p);
#pragma GCC unroll 8
      for (int j = 0; j < RN; ++j) acc[i * RN + j] = _mm512_fmadd_ps(b[j], a, acc[i * RN + j]);
    }
  }
}

template <int RM, int RN, GgmlOrder Order, typename W>
void tile_dots(const float* x, std::int64_t ldx, const W* w, std::int64_t ldw, std::int64_t k, std::int64_t ahead,
               float* y, std::int64_t ldy) {
  // The padding is zeroed only at the fold: zeroing a padded accumulator array up front
  // compiled to a 2 KiB memset call per tile (12% of an 8-client serve profile).
  constexpr int kN = RM * RN, kGroups = (kN + 15) / 16;
  __m512 padded[kGroups * 16];
  __m512 acc[kN];
#pragma GCC unroll 24
  for (int a = 0; a < kN; ++a) acc[a] = _mm512_setzero_ps();
  if constexpr (Order == GgmlOrder::tiled) {
    if (ahead != 0)
      tile_pass<RM, RN, 16, true>(x, ldx, w, ldw, 0, k, ahead, 0, acc);
    else
      tile_pass<RM, RN, 16, false>(x, ldx, w, ldw, 0, k, 0, 0, acc);
#pragma GCC unroll 24
    for (int a = 0; a < kN; ++a) padded[a] = acc[a];
  } else {
    // Chains 0 and 2 into `padded` as c0 + c2, chains 1 and 3 into acc as c1 + c3; each
    // chain starts from zero, as vec_order_lanes's accumulators do.
    const auto chain = [&](std::int64_t from, __m512* sum, bool first) {
      __m512 c[kN];
#pragma GCC unroll 24
      for (int a = 0; a < kN; ++a) c[a] = _mm512_setzero_ps();
      // Each pass prefetches a quarter of the next tiles' lines: all in the first pass
      // asked for more lines at once than the core keeps in flight (84-85 GFLOP/s, above).
      if (ahead != 0)
        tile_pass<RM, RN, 64, true>(x, ldx, w, ldw, from, k, ahead, from / 16 * k / 4, c);
      else
        tile_pass<RM, RN, 64, false>(x, ldx, w, ldw, from, k, 0, 0, c);
#pragma GCC unroll 24
      for (int a = 0; a < kN; ++a) sum[a] = first ? c[a] : _mm512_add_ps(sum[a], c[a]);
    };
    chain(0, padded, true);
    chain(32, padded, false);
    chain(16, acc, true);
    chain(48, acc, false);
#pragma GCC unroll 24
    for (int a = 0; a < kN; ++a) padded[a] = _mm512_add_ps(padded[a], acc[a]);
  }
  for (int a = kN; a < kGroups * 16; ++a) padded[a] = _mm512_setzero_ps();
  alignas(64) float sums[kGroups * 16];
  for (int g = 0; g < kGroups; ++g) fold16x16(padded + 16 * g, sums + 16 * g);
  for (int i = 0; i < RM; ++i) std::memcpy(y + i * ldy, sums + i * RN, sizeof(float) * RN);
}

template <int RM, GgmlOrder Order, typename W, int... RNs>
void tile_cols(int rn, const float* x, std::int64_t ldx, const W* w, std::int64_t ldw, std::int64_t k,
               std::int64_t ahead, float* y, std::int64_t ldy, std::integer_sequence<int, RNs...>) {
  (void)((rn == RNs + 1 ? (tile_dots<RM, RNs + 1, Order>(x, ldx, w, ldw, k, ahead, y, ldy), true) : false) || ...);
}

template <GgmlOrder Order, typename W, int... RMs>
void tile_any(int rm, int rn, const float* x, std::int64_t ldx, const W* w, std::int64_t ldw, std::int64_t k,
              std::int64_t ahead, float* y, std::int64_t ldy, std::integer_sequence<int, RMs...>) {
  (void)((rm == RMs + 1 ? (tile_cols<RMs + 1, Order, W>(rn, x, ldx, w, ldw, k, ahead, y, ldy,
                                              std::make_integer_sequence<int, kTileCols>{}),
                           true)
                        : false) ||
         ...);
}
#endif

// Rows [r0, r1) of x against weight rows [o0, o1) in Order, into y.
template <GgmlOrder Order, typename W>
void block_dots(const float* x, std::int64_t r0, std::int64_t r1, std::int64_t k, const W* w, std::int64_t ldw,
                std::int64_t o0, std::int64_t o1, std::int64_t n_out, float* y) {
#if FUCINA_ARCH_AVX512
  // Rows split evenly over the fewest tiles of at most kTileRows (17 rows: 4 4 3 3 3, not
  // 4 4 4 4 1): a 1-row tile widens 6 weight vectors for 6 FMAs.
  const std::int64_t row_tiles = (r1 - r0 + kTileRows - 1) / kTileRows;
  // The first row tile prefetches the same place in the weight rows whole tiles ahead (at
  // least kTileStreamAhead bytes), so every line is requested once, ahead, by one tile.
  const std::int64_t tile_bytes = kTileCols * ldw * static_cast<std::int64_t>(sizeof(W));
  const std::int64_t ahead = (kTileStreamAhead + tile_bytes - 1) / tile_bytes * kTileCols * ldw;
  for (std::int64_t o = o0; o < o1; o += kTileCols) {
    const int rn = static_cast<int>(std::min<std::int64_t>(kTileCols, o1 - o));
    for (std::int64_t t = 0; t < row_tiles; ++t) {
      const std::int64_t r = r0 + (r1 - r0) * t / row_tiles;
      const int rm = static_cast<int>(r0 + (r1 - r0) * (t + 1) / row_tiles - r);
      tile_any<Order>(rm, rn, x + r * k, k, w + o * ldw, ldw, k, t == 0 ? ahead : 0, y + r * n_out + o, n_out,
                      std::make_integer_sequence<int, kTileRows>{});
    }
  }
#else
  for (std::int64_t o = o0; o < o1; ++o)
    for (std::int64_t r = r0; r < r1; ++r) y[r * n_out + o] = dot_ggml(w + o * ldw, x + r * k, k, Order);
#endif
}

template <typename W>
void matmul_ggml(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const W* w,
                 std::int64_t w_stride, std::int64_t n_out, float* y, GgmlOrder order) {
  const bool tiled = order == GgmlOrder::tiled && k % 16 == 0;
  // Several rows in vec order: one-row arithmetic's batches (Note [One-row arithmetic]).
  const bool vec_rows = order == GgmlOrder::vec && n_rows >= 2 && k % 64 == 0;
  if (tiled || vec_rows) {
    // Tasks: 64 x rows (in L2) times 48 weight rows (in L1 per 6-row tile), weight-major so
    // a task's weights are read once per row block.
    constexpr std::int64_t kRowBlock = 64, kOutBlock = 48;
    const std::int64_t rb = (n_rows + kRowBlock - 1) / kRowBlock, ob = (n_out + kOutBlock - 1) / kOutBlock;
    const auto run = [&](std::int64_t r0, std::int64_t r1, std::int64_t o0, std::int64_t o1) {
      if (tiled)
        block_dots<GgmlOrder::tiled>(x, r0, r1, k, w, w_stride, o0, o1, n_out, y);
      else
        block_dots<GgmlOrder::vec>(x, r0, r1, k, w, w_stride, o0, o1, n_out, y);
    };
    if (rb == 1) {
      // Decode batches stream the weights from DRAM: a thread's output block is one run of
      // rows its tiles prefetch ahead through, so the blocks are few and long (largest first,
      // shrinking to kOutBlock so that the threads finish together), in whole tile columns.
      // Against 48-row tasks (a thread's prefetch ran into the other's next task, and each
      // task's first tile went unprefetched), f16layers on 2 threads: tiled 208-251 ->
      // 245-273 GFLOP/s, vec 183-191 -> 194-199; Qwen3-0.6B F16 at 8 streams 142-147 ->
      // 152-169 t/s (alternated, one machine window).
      const std::int64_t cols = (n_out + kTileCols - 1) / kTileCols;
      pool.parallel_guided(cols, kOutBlock / kTileCols, [&](std::int64_t b, std::int64_t e) {
        run(0, n_rows, b * kTileCols, std::min(n_out, e * kTileCols));
      });
      return;
    }
    // One pool task per block, claimed dynamically: a core slowed by the VM's neighbours
    // leaves its share to the other instead of making it wait at the join.
    pool.parallel_for(rb * ob, [&](std::int64_t t) {
      const std::int64_t o0 = (t / rb) * kOutBlock, r0 = (t % rb) * kRowBlock;
      run(r0, std::min(n_rows, r0 + kRowBlock), o0, std::min(n_out, o0 + kOutBlock));
    });
    return;
  }
  // Small jobs run inline: waking workers costs more than a few thousand MACs.
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, k * n_rows));
#if FUCINA_ARCH_AVX512
  if (n_rows == 1 && order == GgmlOrder::vec && k % 64 == 0) {
    // Decode: one x row, rows of w streamed once; 16 rows folded together (bit for bit
    // dot_ggml's fold) so the per-row tail is a few shuffles.
    const W* w_end = w + (n_out - 1) * w_stride + k;
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
      for (; o < e; ++o) y[o] = dot_ggml(w + o * w_stride, x, k, order);
    });
    return;
  }
#endif
  pool.parallel_range(n_out, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o)
      for (std::int64_t r = 0; r < n_rows; ++r) y[r * n_out + o] = dot_ggml(w + o * w_stride, x + r * k, k, order);
  });
}

}  // namespace

void matmul_f16(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const Half* w,
                std::int64_t w_stride, std::int64_t n_out, float* y, GgmlOrder order) {
  matmul_ggml(pool, x, n_rows, k, w, w_stride, n_out, y, order);
}
void matmul_f32(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const float* w,
                std::int64_t w_stride, std::int64_t n_out, float* y, GgmlOrder order) {
  matmul_ggml(pool, x, n_rows, k, w, w_stride, n_out, y, order);
}

#if FUCINA_ARCH_AVX512
namespace {
// dot_f16_vec_rows's 16-row steps for a head of B 64-blocks (k = 64 B) and NX queries, the
// queries held in registers: as memory operands of the FMAs they were loaded again for every
// key row, and loads, one vector per cycle, bounded the scores (Note [Decode at depth]).
// Each row's lanes are vec_order_lanes's: four chains over the blocks, (c0 + c2) + (c1 + c3).
template <int B, int NX>
std::int64_t vec_rows_held(const Half* w, std::int64_t w_stride, const float* const* x, std::int64_t n, float* const* out) {
  __m512 xr[NX][B][4];
  for (int q = 0; q < NX; ++q)
    for (int b = 0; b < B; ++b)
      for (int l = 0; l < 4; ++l) xr[q][b][l] = _mm512_loadu_ps(x[q] + 64 * b + 16 * l);
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 v[NX][16];
    for (int r = 0; r < 16; ++r) {
      const Half* wr = w + (j + r) * w_stride;
      __m512 a[NX][4];
      for (int q = 0; q < NX; ++q)
        for (int l = 0; l < 4; ++l) a[q][l] = _mm512_setzero_ps();
      for (int b = 0; b < B; ++b)
        for (int l = 0; l < 4; ++l) {
          const __m512 wl = load16(wr + 64 * b + 16 * l);
          for (int q = 0; q < NX; ++q) a[q][l] = _mm512_fmadd_ps(wl, xr[q][b][l], a[q][l]);
        }
      for (int q = 0; q < NX; ++q) v[q][r] = _mm512_add_ps(_mm512_add_ps(a[q][0], a[q][2]), _mm512_add_ps(a[q][1], a[q][3]));
    }
    for (int q = 0; q < NX; ++q) fold16x16(v[q], out[q] + j);
  }
  return j;
}
}  // namespace
#endif

void dot_f16_vec_rows(const Half* w, std::int64_t w_stride, const float* const* x, int n_x, std::int64_t k, std::int64_t n,
                      float* const* out) {
  FUCINA_ASSERT(n_x >= 1 && n_x <= kMaxVecRowQueries);
  std::int64_t j = 0;
#if FUCINA_ARCH_AVX512
  if (k == 64) {  // up to 4 queries held per pass over the rows (16 registers)
    for (int q = 0; q < n_x; q += 4) {
      switch (std::min(4, n_x - q)) {
        case 4: j = vec_rows_held<1, 4>(w, w_stride, x + q, n, out + q); break;
        case 3: j = vec_rows_held<1, 3>(w, w_stride, x + q, n, out + q); break;
        case 2: j = vec_rows_held<1, 2>(w, w_stride, x + q, n, out + q); break;
        default: j = vec_rows_held<1, 1>(w, w_stride, x + q, n, out + q); break;
      }
    }
  } else if (k == 128) {  // up to 2 per pass
    for (int q = 0; q < n_x; q += 2)
      j = n_x - q >= 2 ? vec_rows_held<2, 2>(w, w_stride, x + q, n, out + q) : vec_rows_held<2, 1>(w, w_stride, x + q, n, out + q);
  } else if (k % 64 == 0) {  // no double tail: the folded f32 sum is the result
    for (; j + 16 <= n; j += 16)
      for (int q = 0; q < n_x; q += 2) {
        __m512 v[2][16];
        if (n_x - q >= 2)  // each key row widened once for both queries
          for (int r = 0; r < 16; ++r) vec_order_lanes2(w + (j + r) * w_stride, x[q], x[q + 1], k, v[0][r], v[1][r]);
        else
          for (int r = 0; r < 16; ++r) v[0][r] = vec_order_lanes(w + (j + r) * w_stride, x[q], k);
        for (int i = 0; i < std::min(2, n_x - q); ++i) fold16x16(v[i], out[q + i] + j);
      }
  }
#endif
  for (; j < n; ++j)
    for (int q = 0; q < n_x; ++q) out[q][j] = dot_f16(w + j * w_stride, x[q], k, GgmlOrder::vec);
}

// ---- BF16 (Note [ggml summation order], bf16 part) ----

namespace {

constexpr std::int64_t kBf16Pairs = 32;  // bf16 elements per vdpbf16ps

float bf16_daz(std::uint16_t h) {  // vdpbf16ps reads subnormal inputs as zero
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  return std::bit_cast<float>((u & 0x7f800000u) == 0 ? (u & 0x80000000u) : u);
}
float f32_daz(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.f, x) : x; }

// One vdpbf16ps lane: acc + w[1]·x[1], then + w[0]·x[0], each one FMA with subnormal
// inputs read as zero and a subnormal result flushed to zero (checked against the
// instruction on AMD Zen 5; Intel documents the same).
float dpbf16_lane(float acc, const std::uint16_t* w, const std::uint16_t* x) {
  acc = f32_daz(std::fma(bf16_daz(w[1]), bf16_daz(x[1]), f32_daz(acc)));
  return f32_daz(std::fma(bf16_daz(w[0]), bf16_daz(x[0]), acc));
}

// ggml_vec_dot_bf16: two 16-lane accumulators over 64-blocks (the first 32 elements, the
// next 32), each folded and added in double, the tail's exact products in double.
float dot_bf16_vec_scalar(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k) {
  float c[2][16] = {};
  std::int64_t i = 0;
  for (; i + 2 * kBf16Pairs <= k; i += 2 * kBf16Pairs)
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 16; ++l) c[h][l] = dpbf16_lane(c[h][l], w + i + h * kBf16Pairs + 2 * l, x + i + h * kBf16Pairs + 2 * l);
  double s = 0;
  s += static_cast<double>(fold16(c[0]));
  s += static_cast<double>(fold16(c[1]));
  for (; i < k; ++i) s += static_cast<double>(bf16_to_float(w[i]) * bf16_to_float(x[i]));
  return static_cast<float>(s);
}

// tinyBLAS<32, __m512, __m512bh>: one accumulator over k in steps of 32, folded.
float dot_bf16_tiled_scalar(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k) {
  float c[16] = {};
  for (std::int64_t i = 0; i < k; i += kBf16Pairs)
    for (int l = 0; l < 16; ++l) c[l] = dpbf16_lane(c[l], w + i + 2 * l, x + i + 2 * l);
  return fold16(c);
}

#if FUCINA_ARCH_AVX512BF16
__m512bh load_bf16x32(const std::uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

float dot_bf16_vec(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k) {
  __m512 c1 = _mm512_setzero_ps(), c2 = c1;
  std::int64_t i = 0;
  for (; i + 2 * kBf16Pairs <= k; i += 2 * kBf16Pairs) {
    c1 = _mm512_dpbf16_ps(c1, load_bf16x32(w + i), load_bf16x32(x + i));
    c2 = _mm512_dpbf16_ps(c2, load_bf16x32(w + i + kBf16Pairs), load_bf16x32(x + i + kBf16Pairs));
  }
  alignas(64) float l1[16], l2[16];
  _mm512_store_ps(l1, c1);
  _mm512_store_ps(l2, c2);
  double s = 0;
  s += static_cast<double>(fold16(l1));
  s += static_cast<double>(fold16(l2));
  for (; i < k; ++i) s += static_cast<double>(bf16_to_float(w[i]) * bf16_to_float(x[i]));
  return static_cast<float>(s);
}

// A 4 x 4 tile of tiled-order dots (x rows i, w rows j), each output one accumulator.
template <int RM, int RN>
void tile_bf16(const std::uint16_t* x, std::int64_t ldx, const std::uint16_t* w, std::int64_t ldw, std::int64_t k,
               float* y, std::int64_t ldy) {
  __m512 acc[RM][RN];
  for (auto& r : acc)
    for (auto& a : r) a = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < k; p += kBf16Pairs) {
    __m512bh b[RN];
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) b[j] = load_bf16x32(w + j * ldw + p);
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const __m512bh a = load_bf16x32(x + i * ldx + p);
#pragma GCC unroll 8
      for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], b[j], a);
    }
  }
  alignas(64) float lanes[16];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) {
      _mm512_store_ps(lanes, acc[i][j]);
      y[i * ldy + j] = fold16(lanes);
    }
}
#endif

}  // namespace

float dot_bf16_scalar(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k, GgmlOrder order) {
  return order == GgmlOrder::tiled && k % kBf16Pairs == 0 ? dot_bf16_tiled_scalar(w, x, k) : dot_bf16_vec_scalar(w, x, k);
}

float dot_bf16(const std::uint16_t* w, const std::uint16_t* x, std::int64_t k, GgmlOrder order) {
#if FUCINA_ARCH_AVX512BF16
  if (order == GgmlOrder::tiled && k % kBf16Pairs == 0) {
    float y = 0;
    tile_bf16<1, 1>(x, k, w, k, k, &y, 1);
    return y;
  }
  return dot_bf16_vec(w, x, k);
#else
  return dot_bf16_scalar(w, x, k, order);
#endif
}

void matmul_bf16(ThreadPool& pool, const float* x, std::int64_t n_rows, std::int64_t k, const std::uint16_t* w,
                 std::int64_t w_stride, std::int64_t n_out, float* y, bool one_row) {
  // ggml rounds the activations to bf16 (vec_dot_type BF16), nearest even.
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(n_rows * k));
  pool.parallel_range(n_rows * k, 1 << 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) xb[static_cast<std::size_t>(i)] = float_to_bf16(x[i]);
  });
  // tinyBLAS for >= 2 rows when k % 32 == 0 and n_out % 4 == 0 (Note [ggml summation order]).
  const bool tiles = n_rows >= 2 && k % kBf16Pairs == 0 && n_out % 4 == 0 && !one_row;
  const GgmlOrder order = tiles ? GgmlOrder::tiled : GgmlOrder::vec;
  constexpr std::int64_t kCols = 4;
  const std::int64_t ob = (n_out + kCols - 1) / kCols;
  pool.parallel_for(ob, [&](std::int64_t t) {
    const std::int64_t o0 = t * kCols, o1 = std::min(n_out, o0 + kCols);
#if FUCINA_ARCH_AVX512BF16
    if (order == GgmlOrder::tiled && o1 - o0 == kCols) {
      constexpr std::int64_t kRows = 4;
      std::int64_t r = 0;
      for (; r + kRows <= n_rows; r += kRows)
        tile_bf16<kRows, kCols>(xb.data() + r * k, k, w + o0 * w_stride, w_stride, k, y + r * n_out + o0, n_out);
      for (; r < n_rows; ++r) tile_bf16<1, kCols>(xb.data() + r * k, k, w + o0 * w_stride, w_stride, k, y + r * n_out + o0, n_out);
      return;
    }
#endif
    for (std::int64_t o = o0; o < o1; ++o)
      for (std::int64_t r = 0; r < n_rows; ++r)
        y[r * n_out + o] = dot_bf16(w + o * w_stride, xb.data() + static_cast<std::size_t>(r * k), k, order);
  });
}

}  // namespace fucina::model
