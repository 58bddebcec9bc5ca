// Dense f32 GEMM driver: BLIS-style blocking over packed panels for the general case,
// B-streaming kernels for few rows (decode GEMV) and, by transposition, for few columns.
#include "fucina/kernels/gemm/sgemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "fucina/core/error.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/kernels/gemm/microkernel.hpp"
#include "fucina/kernels/gemm/pack.hpp"
#include "fucina/kernels/gemm/simd.hpp"

namespace fucina::kernels {

namespace gemm {
namespace {

using std::int64_t;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Cache blocking (tuned on Zen 5: 48 KiB L1d, 1 MiB L2 per core): the kc x mr A micro-panel
// (14 KiB) stays in L1 while B micro-panels stream past it from the kc x nc block; the
// mc x kc A block (336 KiB) lives in L2.
template <class Arch>
struct Blocking {
  static constexpr int64_t kc = 256;
  static constexpr int64_t mc = MicroKernel<Arch>::mr * 24;
  static constexpr int64_t nc = MicroKernel<Arch>::nr * 128;
};

// Grow-only 64-byte-aligned scratch; one per thread, so packing never allocates once warm.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(ptr_); }
  float* get(int64_t n) {
    if (n > cap_) {
      const int64_t bytes = round_up(n * static_cast<int64_t>(sizeof(float)), 64);
      void* p = std::aligned_alloc(64, static_cast<size_t>(bytes));
      if (p == nullptr) throw std::bad_alloc();
      std::free(ptr_);
      ptr_ = static_cast<float*>(p);
      cap_ = bytes / static_cast<int64_t>(sizeof(float));
    }
    return ptr_;
  }

 private:
  float* ptr_ = nullptr;
  int64_t cap_ = 0;
};

struct Workspace {
  AlignedBuffer a, b, tile, rows;
};
thread_local Workspace t_workspace;

// c = add ? c + t : t over an mr x nr edge tile (same arithmetic as a micro-kernel's store).
void merge_tile(const float* t, int64_t ld_t, float* c, int64_t rs, int64_t cs, int64_t mr,
                int64_t nr, bool add) {
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      float& dst = c[i * rs + j * cs];
      dst = add ? dst + t[i * ld_t + j] : t[i * ld_t + j];
    }
}

// k is cut into equal kc blocks; the block count depends on k alone (Note [sgemm determinism]).
template <class Arch>
int64_t k_block(int64_t k) {
  const int64_t blocks = ceil_div(k, Blocking<Arch>::kc);
  return ceil_div(k, blocks);
}

// Packs B of batch bi from memory (pack_b).
struct MemoryB {
  template <int NR>
  void pack(const GemmArgs& g, int64_t bi, int64_t pc, int64_t kb, int64_t jc, int64_t nb, float* dst) const {
    pack_b<NR>(g.b + bi * g.b_bs + pc * g.b_rs + jc * g.b_cs, g.b_rs, g.b_cs, kb, nb, dst);
  }
};

// Packs B from a RowSource: NR decoded rows at a time, transposed into the panel.
struct DecodedB {
  const RowSource* src;
  template <int NR>
  void pack(const GemmArgs&, int64_t, int64_t pc, int64_t kb, int64_t jc, int64_t nb, float* dst) const {
    float* rows = t_workspace.rows.get(NR * kb);
    for (int64_t j0 = 0; j0 < nb; j0 += NR, dst += NR * kb) {
      const int64_t nj = std::min<int64_t>(NR, nb - j0);
      src->rows(src->self, jc + j0, nj, pc, kb, rows);
      pack_b<NR>(rows, 1, kb, kb, nj, dst);
    }
  }
};

// One task of the blocked path: C[bi, m0:m1, n0:n1] over the whole k.
template <class Arch, class BSource = MemoryB>
void blocked_tile(const GemmArgs& g, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                  const BSource& bsrc = {}, int64_t k_align = 1) {
  using MK = MicroKernel<Arch>;
  using Blk = Blocking<Arch>;
  constexpr int MR = MK::mr;
  constexpr int NR = MK::nr;
  const float* A = g.a + bi * g.a_bs;
  float* C = g.c + bi * g.c_bs;
  const int64_t kcb = round_up(k_block<Arch>(g.k), k_align);
  Workspace& ws = t_workspace;
  float* abuf = ws.a.get(round_up(std::min(Blk::mc, m1 - m0), MR) * kcb);
  float* bbuf = ws.b.get(round_up(std::min(Blk::nc, n1 - n0), NR) * kcb);
  float* tile = ws.tile.get(MR * NR);

  for (int64_t jc = n0; jc < n1; jc += Blk::nc) {
    const int64_t nb = std::min(Blk::nc, n1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += kcb) {
      const int64_t kb = std::min(kcb, g.k - pc);
      const bool add = g.accumulate || pc > 0;
      bsrc.template pack<NR>(g, bi, pc, kb, jc, nb, bbuf);
      for (int64_t ic = m0; ic < m1; ic += Blk::mc) {
        const int64_t mb = std::min(Blk::mc, m1 - ic);
        pack_a<MR>(A + ic * g.a_rs + pc * g.a_cs, g.a_rs, g.a_cs, mb, kb, abuf);
        auto micro = [&](int64_t ir, int64_t jr) {
          const int64_t nr = std::min<int64_t>(NR, nb - jr);
          const float* bp = bbuf + jr * kb;
          const int64_t mr = std::min<int64_t>(MR, mb - ir);
          const float* ap = abuf + ir * kb;
          float* cp = C + (ic + ir) * g.c_rs + (jc + jr) * g.c_cs;
          if (mr == MR && nr == NR && g.c_cs == 1) {
            MK::run(kb, ap, bp, cp, g.c_rs, add);
          } else {
            MK::run(kb, ap, bp, tile, NR, false);
            merge_tile(tile, NR, cp, g.c_rs, g.c_cs, mr, nr, add);
          }
        };
        for (int64_t ir = 0; ir < mb; ir += MR)
          for (int64_t jr = 0; jr < nb; jr += NR) micro(ir, jr);
      }
    }
  }
}

// Few rows, B rows contiguous (b_cs == 1): stream B once, MS x NV vector accumulators per
// column block, each C element one fma chain over p ascending.
template <class Arch, int MS, int NV>
void gemv_rows_block(const GemmArgs& g, const float* A, const float* B, float* C, int64_t j) {
  using V = Vec<Arch>;
  using batch = typename V::batch;
  constexpr int L = V::lanes;
  batch acc[MS][NV];
  for (int i = 0; i < MS; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = batch(0.0f);
  const float* bp = B + j;
  for (int64_t p = 0; p < g.k; ++p, bp += g.b_rs) {
    batch bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = batch::load_unaligned(bp + v * L);
#pragma GCC unroll 8
    for (int i = 0; i < MS; ++i) {
      const batch ai(A[i * g.a_rs + p * g.a_cs]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fmadd(ai, bv[v], acc[i][v]);
    }
  }
  alignas(64) float tmp[L];
  for (int i = 0; i < MS; ++i)
    for (int v = 0; v < NV; ++v) {
      float* ci = C + i * g.c_rs + (j + v * L) * g.c_cs;
      if (g.c_cs == 1) {
        batch r = acc[i][v];
        if (g.accumulate) r = r + batch::load_unaligned(ci);
        r.store_unaligned(ci);
      } else {
        acc[i][v].store_aligned(tmp);
        for (int l = 0; l < L; ++l)
          ci[l * g.c_cs] = g.accumulate ? ci[l * g.c_cs] + tmp[l] : tmp[l];
      }
    }
}

template <class Arch, int MS>
void gemv_rows(const GemmArgs& g, int64_t bi, int64_t j0, int64_t j1) {
  constexpr int L = Vec<Arch>::lanes;
  constexpr int NV = MS <= 2 ? 4 : (MS <= 4 ? 3 : 2);
  const float* A = g.a + bi * g.a_bs;
  const float* B = g.b + bi * g.b_bs;
  float* C = g.c + bi * g.c_bs;
  int64_t j = j0;
  for (; j + NV * L <= j1; j += NV * L) gemv_rows_block<Arch, MS, NV>(g, A, B, C, j);
  for (; j + L <= j1; j += L) gemv_rows_block<Arch, MS, 1>(g, A, B, C, j);
  for (; j < j1; ++j)
    for (int i = 0; i < MS; ++i) {
      float s = 0.0f;
      for (int64_t p = 0; p < g.k; ++p) s = std::fma(A[i * g.a_rs + p * g.a_cs], B[p * g.b_rs + j], s);
      float& dst = C[i * g.c_rs + j * g.c_cs];
      dst = g.accumulate ? dst + s : s;
    }
}

// Few rows, B columns contiguous (b_rs == 1): JB column dot products at once against MS
// contiguous A rows (lda), lane partial sums reduced, then the k tail chained on.
template <class Arch, int MS, int JB>
void gemv_cols_block(const GemmArgs& g, const float* A, int64_t lda, const float* B, float* C,
                     int64_t j, int jb) {
  using V = Vec<Arch>;
  using batch = typename V::batch;
  constexpr int L = V::lanes;
  batch acc[MS][JB];
  for (int i = 0; i < MS; ++i)
    for (int c = 0; c < JB; ++c) acc[i][c] = batch(0.0f);
  const float* bc[JB];
  for (int c = 0; c < JB; ++c) bc[c] = B + (j + std::min(c, jb - 1)) * g.b_cs;
  int64_t p = 0;
  for (; p + L <= g.k; p += L) {
    batch bv[JB];
#pragma GCC unroll 8
    for (int c = 0; c < JB; ++c) bv[c] = batch::load_unaligned(bc[c] + p);
#pragma GCC unroll 8
    for (int i = 0; i < MS; ++i) {
      const batch ai = batch::load_unaligned(A + i * lda + p);
#pragma GCC unroll 8
      for (int c = 0; c < JB; ++c) acc[i][c] = V::fmadd(ai, bv[c], acc[i][c]);
    }
  }
  for (int i = 0; i < MS; ++i)
    for (int c = 0; c < jb; ++c) {
      float s = V::reduce(acc[i][c]);
      for (int64_t q = p; q < g.k; ++q) s = std::fma(A[i * lda + q], bc[c][q], s);
      float& dst = C[i * g.c_rs + (j + c) * g.c_cs];
      dst = g.accumulate ? dst + s : s;
    }
}

template <class Arch, int MS>
void gemv_cols(const GemmArgs& g, int64_t bi, int64_t j0, int64_t j1) {
  constexpr int JB = MS <= 3 ? 4 : (MS <= 4 ? 3 : (MS <= 6 ? 2 : 1));
  const float* A = g.a + bi * g.a_bs;
  int64_t lda = g.a_rs;
  if (g.a_cs != 1) {  // gather the few A rows contiguously
    float* buf = t_workspace.a.get(MS * g.k);
    for (int i = 0; i < MS; ++i)
      for (int64_t p = 0; p < g.k; ++p) buf[i * g.k + p] = A[i * g.a_rs + p * g.a_cs];
    A = buf;
    lda = g.k;
  }
  const float* B = g.b + bi * g.b_bs;
  float* C = g.c + bi * g.c_bs;
  for (int64_t j = j0; j < j1; j += JB)
    gemv_cols_block<Arch, MS, JB>(g, A, lda, B, C, j, static_cast<int>(std::min<int64_t>(JB, j1 - j)));
}

constexpr int64_t kGemvMaxRows = 8;

template <class Arch, int... Ms>
void gemv_dispatch(const GemmArgs& g, int64_t bi, int64_t j0, int64_t j1,
                   std::integer_sequence<int, Ms...>) {
  const bool rows = g.b_cs == 1;
  const bool done = ((g.m == Ms + 1 ? (rows ? gemv_rows<Arch, Ms + 1>(g, bi, j0, j1)
                                            : gemv_cols<Arch, Ms + 1>(g, bi, j0, j1)),
                      true : false) || ...);
  FUCINA_ASSERT(done);
}

template <class Arch>
void gemv(const GemmArgs& g, int64_t bi, int64_t j0, int64_t j1) {
  gemv_dispatch<Arch>(g, bi, j0, j1, std::make_integer_sequence<int, kGemvMaxRows>{});
}

bool gemv_fits(const GemmArgs& g) { return g.m <= kGemvMaxRows && (g.b_cs == 1 || g.b_rs == 1); }

// C^T = B^T A^T: the same product with the roles of rows and columns swapped.
GemmArgs transposed(const GemmArgs& g) {
  GemmArgs t = g;
  t.m = g.n;
  t.n = g.m;
  t.a = g.b;
  t.a_bs = g.b_bs;
  t.a_rs = g.b_cs;
  t.a_cs = g.b_rs;
  t.b = g.a;
  t.b_bs = g.a_bs;
  t.b_rs = g.a_cs;
  t.b_cs = g.a_rs;
  t.c_rs = g.c_cs;
  t.c_cs = g.c_rs;
  return t;
}

// Below this many multiply-adds a dispatch costs more than it saves.
constexpr double kParallelMinWork = 1 << 20;

template <class Arch>
void run_gemv(const GemmArgs& g, ThreadPool* pool, int threads) {
  int64_t chunk = g.n;
  if (threads > 1) chunk = std::max<int64_t>(256, round_up(ceil_div(g.n, 4 * threads), 64));
  const int64_t chunks = ceil_div(g.n, chunk);
  auto task = [&](int64_t t) {
    const int64_t bi = t / chunks, c = t % chunks;
    gemv<Arch>(g, bi, c * chunk, std::min(g.n, (c + 1) * chunk));
  };
  const int64_t tasks = g.batch * chunks;
  if (threads > 1 && tasks > 1) pool->parallel_for(tasks, task);
  else for (int64_t t = 0; t < tasks; ++t) task(t);
}

template <class Arch, class BSource = MemoryB>
void run_blocked(const GemmArgs& g, ThreadPool* pool, int threads, const BSource& bsrc = {}, int64_t k_align = 1) {
  constexpr int64_t MR = MicroKernel<Arch>::mr, NR = MicroKernel<Arch>::nr;
  // Split each matrix into about 2 tasks per thread, cutting the longer side first so
  // tiles stay square-ish (packing cost ~ (mt + nt) * k per task).
  int64_t tm = 1, tn = 1;
  if (threads > 1) {
    const int64_t per_batch = ceil_div(2 * threads, g.batch);
    while (tm * tn < per_batch) {
      const int64_t mt = ceil_div(g.m, tm), nt = ceil_div(g.n, tn);
      const bool can_m = mt >= 4 * MR, can_n = nt >= 4 * NR;
      if (!can_m && !can_n) break;
      if (can_n && (nt >= mt || !can_m)) ++tn;
      else ++tm;
    }
  }
  const int64_t mt = round_up(ceil_div(g.m, tm), MR), nt = round_up(ceil_div(g.n, tn), NR);
  const int64_t gm = ceil_div(g.m, mt), gn = ceil_div(g.n, nt);
  auto task = [&](int64_t t) {
    const int64_t bi = t / (gm * gn), r = t % (gm * gn);
    const int64_t i = r / gn, j = r % gn;
    blocked_tile<Arch>(g, bi, i * mt, std::min(g.m, (i + 1) * mt), j * nt, std::min(g.n, (j + 1) * nt), bsrc,
                       k_align);
  };
  const int64_t tasks = g.batch * gm * gn;
  if (threads > 1 && tasks > 1) pool->parallel_for(tasks, task);
  else for (int64_t t = 0; t < tasks; ++t) task(t);
}

// b_from_args: false when B comes from a RowSource (args.b unused).
void validate(const GemmArgs& g, bool b_from_args = true) {
  FUCINA_CHECK(g.batch >= 0 && g.m >= 0 && g.n >= 0 && g.k >= 0, InvalidArgument,
               "[sgemm] negative size: batch={} m={} n={} k={}", g.batch, g.m, g.n, g.k);
  const bool empty_c = g.batch == 0 || g.m == 0 || g.n == 0;
  FUCINA_CHECK(empty_c || g.c != nullptr, InvalidArgument, "[sgemm] null C for a {}x{} output", g.m, g.n);
  FUCINA_CHECK(empty_c || g.k == 0 || (g.a != nullptr && (g.b != nullptr || !b_from_args)), InvalidArgument,
               "[sgemm] null A or B with k={}", g.k);
}

// k == 0: the sum is empty, so C becomes 0 unless accumulating.
void zero_c(const GemmArgs& g) {
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) g.c[bi * g.c_bs + i * g.c_rs + j * g.c_cs] = 0.0f;
}

}  // namespace

template <class Arch>
void sgemm_arm(const GemmArgs& args, ThreadPool* pool) {
  validate(args);
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  if (args.k == 0) {
    if (!args.accumulate) zero_c(args);
    return;
  }
  const double work = static_cast<double>(args.batch) * static_cast<double>(args.m) *
                      static_cast<double>(args.n) * static_cast<double>(args.k);
  const int threads = (pool != nullptr && work >= kParallelMinWork) ? pool->size() : 1;
  if (gemv_fits(args)) return run_gemv<Arch>(args, pool, threads);
  if (args.n <= kGemvMaxRows) {
    const GemmArgs t = transposed(args);
    if (gemv_fits(t)) return run_gemv<Arch>(t, pool, threads);
  }
  run_blocked<Arch>(args, pool, threads);
}

template <class Arch>
void sgemm_rows_arm(const GemmArgs& args, const RowSource& b, ThreadPool* pool) {
  FUCINA_CHECK(args.batch == 1, InvalidArgument, "[sgemm_rows] batch must be 1, got {}", args.batch);
  FUCINA_CHECK(b.rows != nullptr && b.k_align >= 1, InvalidArgument, "[sgemm_rows] no row decoder");
  const GemmArgs& g = args;
  validate(g, false);
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {
    if (!g.accumulate) zero_c(g);
    return;
  }
  const double work = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  const int threads = (pool != nullptr && work >= kParallelMinWork) ? pool->size() : 1;
  run_blocked<Arch>(g, pool, threads, DecodedB{&b}, b.k_align);
}

// One instantiation per compiled micro-kernel arm (compiled_microkernel_arms).
template void sgemm_arm<arch::scalar>(const GemmArgs&, ThreadPool*);
#if FUCINA_ARCH_AVX2
template void sgemm_arm<arch::avx2>(const GemmArgs&, ThreadPool*);
#endif
#if FUCINA_ARCH_AVX512
template void sgemm_arm<arch::avx512>(const GemmArgs&, ThreadPool*);
#endif
#if FUCINA_ARCH_NEON
template void sgemm_arm<arch::neon>(const GemmArgs&, ThreadPool*);
#endif

}  // namespace gemm

void sgemm(const GemmArgs& args, ThreadPool* pool) {
  gemm::sgemm_arm<gemm::simd_arm_t<arch::best_arch>>(args, pool);
}

void sgemm_rows(const GemmArgs& args, const RowSource& b, ThreadPool* pool) {
  gemm::sgemm_rows_arm<gemm::simd_arm_t<arch::best_arch>>(args, b, pool);
}

void sgemm_reference(const GemmArgs& g) {
  gemm::validate(g);
  for (std::int64_t bi = 0; bi < g.batch; ++bi)
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        float s = 0.0f;
        for (std::int64_t p = 0; p < g.k; ++p)
          s += g.a[bi * g.a_bs + i * g.a_rs + p * g.a_cs] * g.b[bi * g.b_bs + p * g.b_rs + j * g.b_cs];
        float& dst = g.c[bi * g.c_bs + i * g.c_rs + j * g.c_cs];
        dst = g.accumulate ? dst + s : s;
      }
}

}  // namespace fucina::kernels
