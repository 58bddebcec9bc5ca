// sgemm vs the plain-loop oracle over many shapes and layouts; bit-identity across thread
// counts; every compiled micro-kernel arm vs the scalar twin, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/kernels/gemm/microkernel.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"

namespace fucina::kernels {
namespace {

using std::int64_t;

std::vector<float> random_vec(size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Layout knobs for one problem; storage is sized from the strides.
struct Layout {
  bool trans_a = false, trans_b = false;
  bool bcast_a = false, bcast_b = false;  // batch stride 0
  int64_t c_cs = 1;                       // column stride of C (>1: interleaved C)
  int64_t pad = 0;                        // extra elements per row (leading dimension slack)
  bool accumulate = false;
};

struct Problem {
  GemmArgs args;
  std::vector<float> a, b, c0;
};

Problem make_problem(int64_t batch, int64_t m, int64_t n, int64_t k, const Layout& l, std::uint32_t seed) {
  Problem p;
  GemmArgs& g = p.args;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  // A is m x k: row-major (rs = k + pad) or stored transposed (cs = m + pad).
  if (l.trans_a) { g.a_rs = 1; g.a_cs = m + l.pad; } else { g.a_rs = k + l.pad; g.a_cs = 1; }
  if (l.trans_b) { g.b_rs = 1; g.b_cs = k + l.pad; } else { g.b_rs = n + l.pad; g.b_cs = 1; }
  const int64_t a_mat = l.trans_a ? k * (m + l.pad) : m * (k + l.pad);
  const int64_t b_mat = l.trans_b ? n * (k + l.pad) : k * (n + l.pad);
  g.a_bs = l.bcast_a ? 0 : a_mat;
  g.b_bs = l.bcast_b ? 0 : b_mat;
  g.c_cs = l.c_cs;
  g.c_rs = n * l.c_cs + l.pad;
  g.c_bs = m * g.c_rs;
  g.accumulate = l.accumulate;
  p.a = random_vec(static_cast<size_t>(std::max<int64_t>(1, (l.bcast_a ? 1 : batch) * a_mat)), seed);
  p.b = random_vec(static_cast<size_t>(std::max<int64_t>(1, (l.bcast_b ? 1 : batch) * b_mat)), seed + 1);
  p.c0 = random_vec(static_cast<size_t>(std::max<int64_t>(1, batch * g.c_bs)), seed + 2);
  return p;
}

// Runs fn on a copy of C and returns it.
template <class F>
std::vector<float> run(const Problem& p, F&& fn) {
  std::vector<float> c = p.c0;
  GemmArgs g = p.args;
  g.a = p.a.data();
  g.b = p.b.data();
  g.c = c.data();
  fn(g);
  return c;
}

// |got - want| <= 1e-5 * k * (sum_p |a||b| + |c0|): a relative bound on the dot product.
void expect_close(const Problem& p, const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  const GemmArgs& g = p.args;
  int bad = 0;
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double mag = g.accumulate ? std::abs(p.c0[bi * g.c_bs + i * g.c_rs + j * g.c_cs]) : 0.0;
        for (int64_t q = 0; q < g.k; ++q)
          mag += std::abs(p.a[bi * g.a_bs + i * g.a_rs + q * g.a_cs] * p.b[bi * g.b_bs + q * g.b_rs + j * g.b_cs]);
        const size_t idx = static_cast<size_t>(bi * g.c_bs + i * g.c_rs + j * g.c_cs);
        const double tol = 1e-5 * static_cast<double>(std::max<int64_t>(g.k, 1)) * mag + 1e-30;
        if (std::abs(static_cast<double>(got[idx]) - want[idx]) > tol && ++bad <= 5)
          ADD_FAILURE() << what << " at b=" << bi << " i=" << i << " j=" << j << ": got " << got[idx]
                        << " want " << want[idx];
      }
  // Elements outside the matrix (row padding, C interleave gaps) must be untouched.
  for (size_t idx = 0; idx < got.size(); ++idx) {
    const int64_t e = static_cast<int64_t>(idx);
    const int64_t r = e % std::max<int64_t>(g.c_bs, 1);
    const bool inside = (r % g.c_rs) < g.n * g.c_cs && (r % g.c_rs) % g.c_cs == 0 && r / g.c_rs < g.m &&
                        e < g.batch * g.c_bs;
    if (!inside && got[idx] != p.c0[idx] && ++bad <= 5) ADD_FAILURE() << what << " wrote outside C at " << idx;
  }
  EXPECT_EQ(bad, 0) << what;
}

std::string describe(int64_t batch, int64_t m, int64_t n, int64_t k, const Layout& l) {
  return "batch=" + std::to_string(batch) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k) + (l.trans_a ? " At" : "") + (l.trans_b ? " Bt" : "") +
         (l.bcast_a ? " A*" : "") + (l.bcast_b ? " B*" : "") + " c_cs=" + std::to_string(l.c_cs) +
         (l.accumulate ? " acc" : "");
}

void check_shape(int64_t batch, int64_t m, int64_t n, int64_t k, const Layout& l, ThreadPool* pool) {
  const Problem p = make_problem(batch, m, n, k, l, static_cast<std::uint32_t>(m * 131 + n * 17 + k));
  const auto want = run(p, [](const GemmArgs& g) { sgemm_reference(g); });
  const auto got = run(p, [&](const GemmArgs& g) { sgemm(g, pool); });
  expect_close(p, got, want, describe(batch, m, n, k, l));
  const auto scalar = run(p, [&](const GemmArgs& g) { gemm::sgemm_arm<arch::scalar>(g, pool); });
  expect_close(p, scalar, want, "scalar arm " + describe(batch, m, n, k, l));
}

// B decoded row by row (RowSource): k blocks honour k_align, partial tiles on every side.
TEST(Sgemm, RowSourceMatchesReference) {
  struct Rows {
    const std::vector<float>* w;  // [n, k]
    int64_t k;
    static void rows(const void* self, int64_t j0, int64_t nj, int64_t p0, int64_t kb, float* dst) {
      const auto& r = *static_cast<const Rows*>(self);
      EXPECT_EQ(p0 % 32, 0);
      for (int64_t j = 0; j < nj; ++j)
        for (int64_t p = 0; p < kb; ++p) dst[j * kb + p] = (*r.w)[static_cast<size_t>((j0 + j) * r.k + p0 + p)];
    }
  };
  ThreadPool pool(2);
  for (auto [m, n, k] : {std::array<int64_t, 3>{20, 70, 96}, {50, 33, 800}, {3, 5, 32}}) {
    Problem p = make_problem(1, m, n, k, Layout{.trans_b = true}, static_cast<std::uint32_t>(m + n + k));
    const auto want = run(p, [](const GemmArgs& g) { sgemm_reference(g); });
    Rows src{&p.b, k};
    const auto got = run(p, [&](const GemmArgs& g) { sgemm_rows(g, {.rows = Rows::rows, .self = &src, .k_align = 32}, &pool); });
    expect_close(p, got, want, "rows " + describe(1, m, n, k, Layout{.trans_b = true}));
  }
}

TEST(Sgemm, SmallShapesAllLayouts) {
  ThreadPool pool(2);
  const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17};
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : {1, 2, 7, 16, 17}) {
        check_shape(1, m, n, k, Layout{}, &pool);
        check_shape(1, m, n, k, Layout{.trans_a = true, .trans_b = true, .accumulate = true}, nullptr);
      }
}

TEST(Sgemm, EverySizeUpTo17) {
  for (int64_t s = 1; s <= 17; ++s) {
    check_shape(1, s, s, s, Layout{}, nullptr);
    check_shape(1, s, 33, 2 * s + 1, Layout{.trans_b = true}, nullptr);
    check_shape(1, 31, s, 2 * s + 1, Layout{.trans_a = true}, nullptr);
  }
}

TEST(Sgemm, MediumShapes) {
  ThreadPool pool(2);
  const int64_t sizes[] = {31, 33, 64, 65, 127};
  for (int64_t m : sizes)
    for (int64_t n : sizes) check_shape(1, m, n, m == n ? 129 : 63, Layout{.pad = 3}, &pool);
  check_shape(1, 257, 257, 257, Layout{}, &pool);
  check_shape(1, 257, 129, 300, Layout{.trans_a = true, .trans_b = true}, &pool);
  check_shape(1, 65, 300, 513, Layout{.accumulate = true}, &pool);  // several k blocks
}

TEST(Sgemm, DecodeGemv) {
  ThreadPool pool(2);
  for (int64_t m = 1; m <= 9; ++m) {
    check_shape(1, m, 1000, 300, Layout{}, &pool);
    check_shape(1, m, 1000, 300, Layout{.trans_b = true}, &pool);            // x W^T
    check_shape(1, m, 333, 67, Layout{.trans_a = true, .trans_b = true}, &pool);
    check_shape(1, m, 77, 45, Layout{.c_cs = 3, .accumulate = true}, &pool);
  }
  check_shape(1, 1, 3072, 1024, Layout{}, &pool);
}

TEST(Sgemm, FewColumns) {
  ThreadPool pool(2);
  for (int64_t n = 1; n <= 9; ++n) {
    check_shape(1, 700, n, 150, Layout{}, &pool);
    check_shape(1, 700, n, 150, Layout{.trans_a = true, .accumulate = true}, &pool);
    check_shape(1, 65, n, 37, Layout{.c_cs = 2, .pad = 1}, &pool);
  }
}

TEST(Sgemm, TinyK) {
  ThreadPool pool(2);
  for (int64_t k = 1; k <= 4; ++k) {
    check_shape(1, 200, 300, k, Layout{}, &pool);
    check_shape(2, 45, 70, k, Layout{.trans_b = true, .accumulate = true}, &pool);
  }
}

TEST(Sgemm, BatchedAndBroadcast) {
  ThreadPool pool(2);
  check_shape(3, 20, 40, 30, Layout{}, &pool);
  check_shape(4, 33, 65, 17, Layout{.bcast_a = true}, &pool);
  check_shape(4, 33, 65, 17, Layout{.trans_b = true, .bcast_b = true}, &pool);
  check_shape(5, 2, 100, 50, Layout{.bcast_b = true}, &pool);  // gemv, shared weights
  check_shape(2, 70, 3, 50, Layout{.bcast_a = true, .c_cs = 2}, &pool);
  check_shape(3, 64, 64, 64, Layout{.trans_a = true, .c_cs = 2, .pad = 5, .accumulate = true}, &pool);
}

TEST(Sgemm, NonContiguousC) {
  for (int64_t cs : {2, 5})
    for (int64_t s : {1, 15, 33}) check_shape(1, s, s + 2, s + 4, Layout{.c_cs = cs}, nullptr);
}

TEST(Sgemm, ZeroSizes) {
  std::vector<float> c(16, 7.0f);
  const float a[4] = {1, 2, 3, 4};
  GemmArgs g{.batch = 1, .m = 4, .n = 4, .k = 0, .a = a, .a_rs = 0, .b = a, .b_rs = 4, .c = c.data(), .c_rs = 4};
  g.accumulate = true;
  sgemm(g, nullptr);
  EXPECT_EQ(c, std::vector<float>(16, 7.0f));  // empty sum added
  g.accumulate = false;
  sgemm(g, nullptr);
  EXPECT_EQ(c, std::vector<float>(16, 0.0f));  // empty sum stored
  GemmArgs none{.m = 0, .n = 5, .k = 5};       // null pointers are fine when nothing is touched
  sgemm(none, nullptr);
  GemmArgs no_batch{.batch = 0, .m = 5, .n = 5, .k = 5};
  sgemm(no_batch, nullptr);
}

TEST(Sgemm, BadArgumentsThrow) {
  GemmArgs neg{.m = -1, .n = 2, .k = 2};
  EXPECT_THROW(sgemm(neg, nullptr), Error);
  GemmArgs null_a{.m = 2, .n = 2, .k = 2};
  try {
    sgemm(null_a, nullptr);
    ADD_FAILURE() << "null operands accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
}

TEST(Sgemm, ExactOnIntegers) {
  // Small integers make every partial sum exact, so all arms and the oracle agree bit for bit.
  const int64_t m = 37, n = 70, k = 300;
  std::vector<float> a(m * k), b(k * n), c(m * n), want(m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 7 - 3);
  for (int64_t i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 5 - 2);
  GemmArgs g{.m = m, .n = n, .k = k, .a = a.data(), .a_rs = k, .b = b.data(), .b_rs = n, .c = c.data(), .c_rs = n};
  sgemm(g, nullptr);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += static_cast<double>(a[i * k + q]) * b[q * n + j];
      want[i * n + j] = static_cast<float>(s);
    }
  EXPECT_EQ(c, want);
}

TEST(Sgemm, BitIdenticalAcrossThreadCounts) {
  ThreadPool p1(1), p2(2), p4(4);
  struct Case { int64_t batch, m, n, k; Layout l; };
  const Case cases[] = {
      {1, 300, 400, 700, {}},
      {1, 513, 257, 600, {.trans_a = true, .accumulate = true}},
      {1, 1, 4000, 300, {}},
      {1, 3, 4000, 300, {.trans_b = true}},
      {1, 2000, 5, 200, {}},
      {3, 100, 130, 90, {.bcast_b = true, .c_cs = 2}},
  };
  for (const Case& cs : cases) {
    const Problem p = make_problem(cs.batch, cs.m, cs.n, cs.k, cs.l, 42);
    const auto serial = run(p, [](const GemmArgs& g) { sgemm(g, nullptr); });
    for (ThreadPool* pool : {&p1, &p2, &p4}) {
      const auto got = run(p, [&](const GemmArgs& g) { sgemm(g, pool); });
      EXPECT_TRUE(got == serial) << describe(cs.batch, cs.m, cs.n, cs.k, cs.l) << " threads=" << pool->size();
    }
  }
}

// Each compiled micro-kernel arm vs the scalar micro-kernel of the same tile shape.
template <class Arch>
class MicroKernelTest : public ::testing::Test {};

template <class L>
struct ToTypes;
template <class... Archs>
struct ToTypes<arch::ArchList<Archs...>> {
  using type = ::testing::Types<Archs...>;
};
using CompiledArms = ToTypes<gemm::compiled_microkernel_arms>::type;

struct ArmName {
  template <class T>
  static std::string GetName(int) { return T::name; }
};
TYPED_TEST_SUITE(MicroKernelTest, CompiledArms, ArmName);

TYPED_TEST(MicroKernelTest, MatchesScalarTwinBitForBit) {
  using MK = gemm::MicroKernel<TypeParam>;
  constexpr int MR = MK::mr, NR = MK::nr;
  for (int64_t kc : {1, 2, 3, 17, 256}) {
    // Packed panels must be 64-byte aligned (Note [Packed panels]).
    const size_t na = static_cast<size_t>(kc * MR), nb = static_cast<size_t>(kc * NR);
    float* a = static_cast<float*>(std::aligned_alloc(64, ((na * 4 + 63) / 64) * 64));
    float* b = static_cast<float*>(std::aligned_alloc(64, ((nb * 4 + 63) / 64) * 64));
    const auto ra = random_vec(na, 7), rb = random_vec(nb, 8);
    std::copy(ra.begin(), ra.end(), a);
    std::copy(rb.begin(), rb.end(), b);
    for (bool add : {false, true}) {
      const int64_t ld = NR + 3;
      std::vector<float> c_arm = random_vec(static_cast<size_t>(MR * ld), 9), c_twin = c_arm;
      MK::run(kc, a, b, c_arm.data(), ld, add);
      gemm::microkernel_scalar<MR, NR>(kc, a, b, c_twin.data(), ld, add);
      EXPECT_TRUE(c_arm == c_twin) << TypeParam::name << " kc=" << kc << " add=" << add;
    }
    std::free(a);
    std::free(b);
  }
}

// The full driver per arm agrees with the oracle (the blocked path and the GEMV paths).
TYPED_TEST(MicroKernelTest, DriverMatchesReference) {
  ThreadPool pool(2);
  for (int64_t m : {1, 5, 40})
    for (Layout l : {Layout{}, Layout{.trans_a = true, .trans_b = true, .accumulate = true}}) {
      const Problem p = make_problem(1, m, 150, 90, l, 3);
      const auto want = run(p, [](const GemmArgs& g) { sgemm_reference(g); });
      const auto got = run(p, [&](const GemmArgs& g) { gemm::sgemm_arm<TypeParam>(g, &pool); });
      expect_close(p, got, want, std::string(TypeParam::name) + " " + describe(1, m, 150, 90, l));
    }
}

TEST(Arch, BestArchIsCompiled) {
  EXPECT_TRUE(arch::best_arch::compiled);
  EXPECT_TRUE(arch::scalar::compiled);
#if defined(FUCINA_SCALAR)
  EXPECT_STREQ(arch::best_arch::name, "scalar");
#endif
  static_assert(std::is_base_of_v<arch::avx512, arch::avx512vnni>);
  static_assert(std::is_base_of_v<arch::avx2, arch::avxvnni>);
  static_assert(std::is_same_v<gemm::simd_arm_t<arch::scalar>, arch::scalar>);
}

}  // namespace
}  // namespace fucina::kernels
