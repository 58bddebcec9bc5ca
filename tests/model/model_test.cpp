// Unit tests of the inference pieces that need no model file: the f16 dot kernels (SIMD
// arm == scalar twin bit for bit, both == an exact double reference within rounding),
// flash_attention_f16 vs a plain softmax reference, KV-cache limits, and GGUF loading
// errors on small files written with our GGUF writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fucina/core/huge_pages.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/flash_attention.hpp"
#include "fucina/model/model.hpp"

using namespace fucina;
using namespace fucina::model;

namespace {

std::vector<Half> rand_half(std::size_t n, std::uint64_t seed) {
  std::vector<Half> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = Half{float_to_half(rng::normal(seed, i))};
  return v;
}
std::vector<float> rand_f16_exact(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = half_to_float(float_to_half(rng::normal(seed, i)));
  return v;
}

}  // namespace

TEST(F16Dot, SimdMatchesScalarBitExact) {
  for (std::int64_t k : {16, 32, 48, 64, 100, 192, 256, 1000}) {
    const auto w = rand_half(static_cast<std::size_t>(k), 1 + k);
    const auto x = rand_f16_exact(static_cast<std::size_t>(k), 100 + k);
    for (auto order : {GgmlOrder::tiled, GgmlOrder::vec}) {
      const float a = dot_f16(w.data(), x.data(), k, order);
      const float b = dot_f16_scalar(w.data(), x.data(), k, order);
      EXPECT_EQ(a, b) << "k=" << k;
      double ref = 0;
      for (std::int64_t i = 0; i < k; ++i) ref += double(half_to_float(w[i].bits)) * x[i];
      EXPECT_NEAR(a, ref, 1e-5 * std::sqrt(double(k)) * 4) << "k=" << k;
    }
  }
}

// f32 and bf16 weights: the SIMD arms against their scalar twins (the twins carry ggml's
// orders: the vec_dot_f32 tail's 8-at-a-time products and fused epilogue, vdpbf16ps's
// pair order), for tails of every length class; multi-row products equal one-row dots.
TEST(F32Dot, SimdMatchesScalarBitExact) {
  for (std::int64_t k : {3, 13, 16, 64, 77, 96, 172, 200, 1000}) {
    std::vector<float> w(static_cast<std::size_t>(k)), x(w.size());
    for (std::int64_t i = 0; i < k; ++i) w[static_cast<std::size_t>(i)] = rng::normal(3 + k, i), x[static_cast<std::size_t>(i)] = rng::normal(4 + k, i);
    for (auto order : {GgmlOrder::tiled, GgmlOrder::vec}) {
      const float a = dot_f32(w.data(), x.data(), k, order);
      EXPECT_EQ(a, dot_f32_scalar(w.data(), x.data(), k, order)) << "k=" << k;
      double ref = 0;
      for (std::int64_t i = 0; i < k; ++i) ref += double(w[static_cast<std::size_t>(i)]) * x[static_cast<std::size_t>(i)];
      EXPECT_NEAR(a, ref, 1e-5 * std::sqrt(double(k)) * 4) << "k=" << k;
    }
  }
}

TEST(Bf16Dot, SimdMatchesScalarTwinAndMatmulRows) {
  ThreadPool pool(2);
  for (std::int64_t k : {32, 40, 64, 128, 200, 256}) {
    const std::int64_t n_out = 8, n = 5;
    std::vector<std::uint16_t> w(static_cast<std::size_t>(n_out * k));
    std::vector<float> x(static_cast<std::size_t>(n * k));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = float_to_bf16(rng::normal(5, i));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = rng::normal(6, i);
    std::vector<std::uint16_t> xb(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);
    for (auto order : {GgmlOrder::tiled, GgmlOrder::vec})
      EXPECT_EQ(dot_bf16(w.data(), xb.data(), k, order), dot_bf16_scalar(w.data(), xb.data(), k, order)) << "k=" << k;
    std::vector<float> y(static_cast<std::size_t>(n * n_out));
    matmul_bf16(pool, x.data(), n, k, w.data(), k, n_out, y.data());  // >= 2 rows: tiled when k % 32 == 0
    const GgmlOrder order = k % 32 == 0 ? GgmlOrder::tiled : GgmlOrder::vec;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t o = 0; o < n_out; ++o)
        ASSERT_EQ(y[static_cast<std::size_t>(r * n_out + o)],
                  dot_bf16_scalar(w.data() + o * k, xb.data() + r * k, k, order))
            << "k=" << k << " row " << r << " out " << o;
  }
}

// The batched score dots fold 16 rows at a time, for up to kMaxVecRowQueries queries at once
// (held 4 or 2 per pass over the rows); each must keep dot_f16's bits, and no other output
// is written.
TEST(F16Dot, VecRowsMatchDotBitExact) {
  for (std::int64_t k : {64, 128, 96, 256}) {
    const std::int64_t n = 37, stride = k + 8;
    const auto w = rand_half(static_cast<std::size_t>(n * stride), 31 + k);
    std::vector<std::vector<float>> x;
    for (int q = 0; q < kMaxVecRowQueries; ++q) x.push_back(rand_f16_exact(static_cast<std::size_t>(k), 32 + k + 7 * q));
    for (int n_x : {1, 2, 3, 5, kMaxVecRowQueries}) {
      std::vector<std::vector<float>> out(kMaxVecRowQueries, std::vector<float>(n, -1.f));
      const float* xs[kMaxVecRowQueries];
      float* outs[kMaxVecRowQueries];
      for (int q = 0; q < kMaxVecRowQueries; ++q) xs[q] = x[q].data(), outs[q] = out[q].data();
      dot_f16_vec_rows(w.data(), stride, xs, n_x, k, n, outs);
      for (int q = 0; q < kMaxVecRowQueries; ++q)
        for (std::int64_t j = 0; j < n; ++j) {
          if (q < n_x)
            ASSERT_EQ(out[q][j], dot_f16(w.data() + j * stride, x[q].data(), k, GgmlOrder::vec))
                << "k=" << k << " n_x=" << n_x << " query " << q << " row " << j;
          else
            ASSERT_EQ(out[q][j], -1.f);
        }
    }
  }
}

// The register-tiled matmul must give every output the exact bits of the tiled dot, for
// shapes that leave partial tiles on both sides and for any thread count.
TEST(F16Dot, TiledMatmulMatchesDotBitExact) {
  for (auto [n, k, n_out] : {std::array<std::int64_t, 3>{1, 64, 13}, {3, 32, 7}, {7, 128, 50}, {70, 48, 97}}) {
    const auto w = rand_half(static_cast<std::size_t>(n_out * k), 11 + n);
    const auto x = rand_f16_exact(static_cast<std::size_t>(n * k), 12 + n);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<std::size_t>(n * n_out), -1.f);
      matmul_f16(pool, x.data(), n, k, w.data(), k, n_out, y.data(), GgmlOrder::tiled);
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t o = 0; o < n_out; ++o)
          ASSERT_EQ(y[static_cast<std::size_t>(r * n_out + o)],
                    dot_f16_scalar(w.data() + o * k, x.data() + r * k, k, GgmlOrder::tiled))
              << "n=" << n << " k=" << k << " n_out=" << n_out << " r=" << r << " o=" << o;
    }
  }
}

// Batched rows in both orders (plain batches tiled, one-row arithmetic's rows vec): every
// row count a tile split meets (1-9, 13, 17), small k (the default model's 256 and 768) and
// k past the vec order's k-blocks, partial column tiles, rows of whole cache lines (80), one
// to three threads (the guided chunks differ with the count): each output carries the exact
// bits of the one-row dot in its order.
TEST(F16Dot, BatchedRowsMatchDotBitExactInBothOrders) {
  for (auto [k, n_out] : {std::array<std::int64_t, 2>{64, 13}, {256, 50}, {256, 80}, {768, 31}, {2176, 7}}) {
    const auto w = rand_half(static_cast<std::size_t>(n_out * k), 51 + k);
    for (std::int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17}) {
      const auto x = rand_f16_exact(static_cast<std::size_t>(n * k), 52 + k + n);
      for (auto order : {GgmlOrder::tiled, GgmlOrder::vec})
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(static_cast<std::size_t>(n * n_out), -1.f);
          matmul_f16(pool, x.data(), n, k, w.data(), k, n_out, y.data(), order);
          for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t o = 0; o < n_out; ++o)
              ASSERT_EQ(y[static_cast<std::size_t>(r * n_out + o)], dot_f16_scalar(w.data() + o * k, x.data() + r * k, k, order))
                  << "n=" << n << " k=" << k << " n_out=" << n_out << " r=" << r << " o=" << o
                  << (order == GgmlOrder::vec ? " vec" : " tiled") << " threads=" << threads;
        }
    }
  }
}

// Decode (one x row, vec order) streams w in 16-row blocks folded together; every output
// must still carry the exact bits of the vec dot, across block tails, strides and threads.
TEST(F16Dot, DecodeMatmulMatchesVecDotBitExact) {
  for (auto [k, n_out, stride] : {std::array<std::int64_t, 3>{64, 13, 64}, {128, 300, 136}, {96, 50, 96}, {1024, 1000, 1024}}) {
    const auto w = rand_half(static_cast<std::size_t>(n_out * stride), 41 + k);
    const auto x = rand_f16_exact(static_cast<std::size_t>(k), 42 + k);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<std::size_t>(n_out), -1.f);
      matmul_f16(pool, x.data(), 1, k, w.data(), stride, n_out, y.data(), GgmlOrder::vec);
      for (std::int64_t o = 0; o < n_out; ++o)
        ASSERT_EQ(y[static_cast<std::size_t>(o)], dot_f16_scalar(w.data() + o * stride, x.data(), k, GgmlOrder::vec))
            << "k=" << k << " n_out=" << n_out << " o=" << o << " threads=" << threads;
    }
  }
}

TEST(F16Dot, RoundToF16IsNearestEven) {
  float v[3] = {1.0f + 1.0f / 2048.f, 1.0f + 3.0f / 2048.f, -2.5e-8f};  // ties go to even; tiny -> -0
  round_to_f16(v, 3);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f + 2.0f / 1024.f);
  EXPECT_EQ(v[2], 0.0f);
}

TEST(FlashAttention, MatchesSoftmaxReferenceWithinF16) {
  Context ctx({.threads = 2});
  const std::int64_t n = 3, past = 4, kvh = 2, grp = 2, hd = 16, n_kv = past + n;
  auto q = Tensor<"seq", "kvh", "grp", "hd">::randn(ctx, {n, kvh, grp, hd}, 7);
  auto kf = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 8);
  auto vf = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 9);
  auto k16 = kf.to<DType::f16>(ctx), v16 = vf.to<DType::f16>(ctx);
  const float scale = 0.25f;
  auto o = flash_attention_f16(ctx, q, k16, v16, past, scale);
  // Reference: the same math in f32 over the f16 keys/values, by einsum.
  auto keys = k16.to<DType::f32>(ctx), values = v16.to<DType::f32>(ctx);
  auto s = mul(ctx, einsum<"kvh", "grp", "seq", "kseq">(ctx, q, keys), scale);
  auto p = softmax<"kseq">(ctx, add(ctx, s, causal_mask<"seq", "kseq">(ctx, n, n_kv, past)));
  auto ref = einsum<"seq", "kvh", "grp", "hd">(ctx, p, values).to_vector();
  const auto got = o.to_vector();
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 5e-3) << i;
}

// Note [f16 flash attention] spelled out one key at a time in scalar code: the kernel (its
// register-held accumulators for head dims 64 and 128, the generic path otherwise) must
// give exactly these bits.
TEST(FlashAttention, EqualsTheSequentialF16RecipeBitExact) {
  Context ctx({.threads = 2});
  for (const std::int64_t hd : {16, 64, 128}) {
    const std::int64_t n = 6, past = 37, kvh = 2, grp = 2, n_kv = past + n;  // rows 4 + 2 per task
    auto q = Tensor<"seq", "kvh", "grp", "hd">::randn(ctx, {n, kvh, grp, hd}, 17 + hd);
    auto k16 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 18 + hd).to<DType::f16>(ctx);
    auto v16 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 19 + hd).to<DType::f16>(ctx);
    const float scale = 1.f / std::sqrt(static_cast<float>(hd));
    const auto got = flash_attention_f16(ctx, q, k16, v16, past, scale).to_vector();
    const auto qv = q.to_vector();
    const Half* kp = k16.raw().data<Half>();
    const Half* vp = v16.raw().data<Half>();
    auto r16 = [](float x) { return half_to_float(float_to_half(x)); };
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t h = 0; h < kvh; ++h)
        for (std::int64_t g = 0; g < grp; ++g) {
          const std::int64_t row = (i * kvh + h) * grp + g;
          std::vector<float> qh(hd), acc(hd, 0.f);
          for (std::int64_t d = 0; d < hd; ++d) qh[d] = r16(qv[row * hd + d]);
          float m = -INFINITY, sum = 0.f;
          for (std::int64_t j = 0; j <= past + i; ++j) {
            const float sc = dot_f16_scalar(kp + (j * kvh + h) * hd, qh.data(), hd, GgmlOrder::vec) * scale;
            float ms = 1.f, vs = 1.f;
            if (sc > m) {
              ms = std::exp(m - sc);
              m = sc;
              for (float& a : acc) a = r16(a * ms);
            } else {
              vs = std::exp(sc - m);
            }
            for (std::int64_t d = 0; d < hd; ++d) acc[d] = r16(std::fma(half_to_float(vp[(j * kvh + h) * hd + d].bits), vs, acc[d]));
            sum = std::fma(sum, ms, vs);
          }
          for (std::int64_t d = 0; d < hd; ++d)
            ASSERT_EQ(got[row * hd + d], acc[d] * (1.f / sum)) << "hd " << hd << " row " << row << " dim " << d;
        }
  }
}

// Note [Decode at depth]: a paged cache read in place through its block table (runs cut at
// block ends, blocks out of order), several sequences in one pass, and the split of Note
// [split decode] give exactly the bits of the contiguous single-sequence call.
TEST(FlashAttention, PagedViewsAndOneBatchedPassEqualContiguousCalls) {
  Context ctx({.threads = 3});
  for (const std::int64_t hd : {32, 128}) {
    const std::int64_t kvh = 2, grp = 2, block = 16;
    const float scale = 1.f / std::sqrt(static_cast<float>(hd));
    // Two sequences: a decode row after 200 positions (split in chunks of 70) and 3 rows after 37.
    const std::int64_t n_kv[2] = {201, 40}, n_new[2] = {1, 3}, chunk[2] = {70, 0};
    std::vector<Tensor<"seq", "kvh", "grp", "hd">> qs;
    std::vector<TensorT<DType::f16, "kseq", "kvh", "hd">> ks, vs;
    std::vector<std::vector<float>> want;
    for (int s = 0; s < 2; ++s) {
      qs.push_back(Tensor<"seq", "kvh", "grp", "hd">::randn(ctx, {n_new[s], kvh, grp, hd}, 40 + s + hd));
      ks.push_back(Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv[s], kvh, hd}, 50 + s + hd).to<DType::f16>(ctx));
      vs.push_back(Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv[s], kvh, hd}, 60 + s + hd).to<DType::f16>(ctx));
      want.push_back(flash_attention_f16(ctx, qs[s], ks[s], vs[s], n_kv[s] - n_new[s], scale, chunk[s]).to_vector());
    }
    // One pool of blocks; sequence s's block b sits at pool block table[s][b] (reversed, interleaved).
    const std::int64_t n_blocks = (n_kv[0] + block - 1) / block + (n_kv[1] + block - 1) / block;
    auto kpool = TensorT<DType::f16, "kseq", "kvh", "hd">::zeros(ctx, {n_blocks * block, kvh, hd});
    auto vpool = TensorT<DType::f16, "kseq", "kvh", "hd">::zeros(ctx, {n_blocks * block, kvh, hd});
    std::vector<std::int32_t> table[2];
    const auto full = [&](int s) { return static_cast<std::int64_t>(table[s].size()) * block >= n_kv[s]; };
    for (std::int32_t b = static_cast<std::int32_t>(n_blocks) - 1, s = 0; b >= 0; --b, s = 1 - s)
      table[full(s) ? 1 - s : s].push_back(b);
    const std::int64_t row = kvh * hd;
    for (int s = 0; s < 2; ++s)
      for (std::int64_t p = 0; p < n_kv[s]; ++p) {
        const std::int64_t dst = table[s][static_cast<std::size_t>(p / block)] * block + p % block;
        std::copy_n(ks[s].raw().data<Half>() + p * row, row, kpool.raw().data<Half>() + dst * row);
        std::copy_n(vs[s].raw().data<Half>() + p * row, row, vpool.raw().data<Half>() + dst * row);
      }
    auto q = concat<"seq">(ctx, qs[0], qs[1]);
    const AttentionRows rows[2] = {
        {.r0 = 0, .n = 1, .n_past = n_kv[0] - 1, .kv_chunk = chunk[0], .kv = {kpool.raw(), vpool.raw(), table[0], block}},
        {.r0 = 1, .n = 3, .n_past = n_kv[1] - 3, .kv_chunk = 0, .kv = {kpool.raw(), vpool.raw(), table[1], block}}};
    const auto got = flash_attention_f16(ctx, q, rows, scale).to_vector();
    const std::size_t first = want[0].size();
    ASSERT_EQ(got.size(), first + want[1].size());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], i < first ? want[0][i] : want[1][i - first]) << "hd " << hd << " element " << i;
  }
}

// Note [Rows share their keys]: consecutive rows of one cache -- one entry of several rows,
// or one-row entries one position apart as a verification passes them (split in chunks of
// Note [split decode] or not, alike or row by row), in a paged view whose runs end at block
// ends -- are taken together by one task; each row must keep exactly the bits it has alone.
TEST(FlashAttention, RowsSharingTheirKeysEqualEachRowAlone) {
  Context ctx({.threads = 2});
  for (const std::int64_t hd : {16, 64, 128})
    for (const std::int64_t grp : {2, 3}) {
      const std::int64_t kvh = 2, past = 37, n = 7, n_kv = past + n, block = 16;
      const float scale = 1.f / std::sqrt(static_cast<float>(hd));
      auto q = Tensor<"seq", "kvh", "grp", "hd">::randn(ctx, {n, kvh, grp, hd}, 70 + hd + grp);
      auto k16 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 71 + hd).to<DType::f16>(ctx);
      auto v16 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 72 + hd).to<DType::f16>(ctx);
      // The same positions in a paged pool, blocks in reverse order.
      const std::int64_t n_blocks = (n_kv + block - 1) / block;
      auto kpool = TensorT<DType::f16, "kseq", "kvh", "hd">::zeros(ctx, {n_blocks * block, kvh, hd});
      auto vpool = TensorT<DType::f16, "kseq", "kvh", "hd">::zeros(ctx, {n_blocks * block, kvh, hd});
      std::vector<std::int32_t> table;
      for (std::int64_t b = n_blocks - 1; b >= 0; --b) table.push_back(static_cast<std::int32_t>(b));
      const std::int64_t row = kvh * hd;
      for (std::int64_t p = 0; p < n_kv; ++p) {
        const std::int64_t dst = table[static_cast<std::size_t>(p / block)] * block + p % block;
        std::copy_n(k16.raw().data<Half>() + p * row, row, kpool.raw().data<Half>() + dst * row);
        std::copy_n(v16.raw().data<Half>() + p * row, row, vpool.raw().data<Half>() + dst * row);
      }
      const KvView flat{k16.raw(), v16.raw()}, paged{kpool.raw(), vpool.raw(), table, block};
      // Another cache's rows at the positions that would follow: never in the same task.
      auto k2 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 73 + hd).to<DType::f16>(ctx);
      auto v2 = Tensor<"kseq", "kvh", "hd">::randn(ctx, {n_kv, kvh, hd}, 74 + hd).to<DType::f16>(ctx);
      {
        std::vector<AttentionRows> mixed;
        std::vector<float> want;
        for (std::int64_t r = 0; r < n; ++r) {
          mixed.push_back({.r0 = r, .n = 1, .n_past = past + r, .kv = r % 2 == 0 ? flat : KvView{k2.raw(), v2.raw()}});
          const auto o = flash_attention_f16(ctx, q, std::span(&mixed.back(), 1), scale).to_vector();
          want.insert(want.end(), o.begin() + r * row * grp, o.begin() + (r + 1) * row * grp);
        }
        const auto got = flash_attention_f16(ctx, q, mixed, scale).to_vector();
        for (std::size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
              << "hd " << hd << " grp " << grp << " two caches, element " << i;
      }
      for (const KvView& kv : {flat, paged})
        for (const int split : {0, 1, 2}) {  // no row split; every row in chunks of 40 or 12; odd rows in 12s
          // Row r sees past + r + 1 keys: 38..44.
          const auto chunk_of = [&](std::int64_t r) -> std::int64_t {
            return split == 0 ? 0 : split == 1 ? (r < 3 ? 40 : 12) : r % 2 == 1 ? 12 : 0;
          };
          std::vector<float> want;
          for (std::int64_t r = 0; r < n; ++r) {
            const AttentionRows one{.r0 = r, .n = 1, .n_past = past + r, .kv_chunk = chunk_of(r), .kv = kv};
            const auto o = flash_attention_f16(ctx, q, std::span(&one, 1), scale).to_vector();
            want.insert(want.end(), o.begin() + r * row * grp, o.begin() + (r + 1) * row * grp);
          }
          std::vector<AttentionRows> each;
          for (std::int64_t r = 0; r < n; ++r)
            each.push_back({.r0 = r, .n = 1, .n_past = past + r, .kv_chunk = chunk_of(r), .kv = kv});
          for (const bool reversed : {false, true}) {  // reversed, no row follows the one before
            if (reversed) std::reverse(each.begin(), each.end());
            const auto got = flash_attention_f16(ctx, q, each, scale).to_vector();
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
                  << "hd " << hd << " grp " << grp << (kv.blocks.empty() ? " flat" : " paged") << " split " << split
                  << (reversed ? " reversed" : "") << " element " << i;
          }
          if (split == 0) {  // one entry of n rows: the same bits
            const AttentionRows all{.r0 = 0, .n = n, .n_past = past, .kv = kv};
            const auto got_all = flash_attention_f16(ctx, q, std::span(&all, 1), scale).to_vector();
            for (std::size_t i = 0; i < got_all.size(); ++i)
              ASSERT_EQ(std::bit_cast<std::uint32_t>(got_all[i]), std::bit_cast<std::uint32_t>(want[i]))
                  << "hd " << hd << " grp " << grp << (kv.blocks.empty() ? " flat" : " paged") << " element " << i;
          }
        }
    }
}

TEST(KvCache, FullContextIsAClearError) {
  Context ctx({.threads = 1});
  ModelConfig c;
  c.n_layer = 1, c.n_head = 2, c.n_head_kv = 1, c.head_dim = 4;
  KvCache cache(c, 4);
  auto rows = KvCache::Rows::zeros(ctx, {3, 1, 4});
  cache.store(ctx, 0, rows, rows);
  cache.advance(3);
  EXPECT_EQ(cache.size(), 3);
  try {
    cache.reserve(2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("context is full"), std::string::npos);
  }
  EXPECT_THROW(KvCache(c, 0), Error);
}

// Note [KV cache pages]: a small solo cache is one block on huge pages (2 MiB-aligned, every
// layer's K and V inside it); a long one is not committed a huge page per head region.
TEST(KvCache, SmallCacheIsOneHugePageBlock) {
  ModelConfig c;
  c.n_layer = 8, c.n_head = 4, c.n_head_kv = 2, c.head_dim = 64;  // the default model's shape
  const KvCache small(c, 512);
  const auto* base = static_cast<const std::byte*>(small.view(0).keys.buf.get()->data);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(base) % kHugePageBytes, 0u);
  for (std::int64_t l = 0; l < c.n_layer; ++l)
    for (const auto& t : {small.view(l).keys, small.view(l).values}) {
      EXPECT_EQ(t.buf.get()->data, base) << "layer " << l;
      EXPECT_EQ(t.buf.get()->bytes, 2 * static_cast<std::size_t>(c.n_layer) * KvCache::layer_bytes(c, 512, KvType::f16));
    }
  // 2 * 8 * 2 * 8200 * 64 * 2 bytes, just over kHugeSoloBytes (32 MiB): 4 KiB pages, committed as
  // written (a 64-byte-aligned block this large is mmap'd by glibc: page-aligned plus its
  // header, never 2 MiB-aligned).
  const KvCache large(c, 8200);
  EXPECT_GT(large.view(0).keys.buf.get()->bytes, KvCache::kHugeSoloBytes);
  EXPECT_NE(reinterpret_cast<std::uintptr_t>(large.view(0).keys.buf.get()->data) % kHugePageBytes, 0u);
}

namespace {

std::vector<std::byte> tiny_file(const std::string& arch, bool drop_some) {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  const std::string a = arch;
  w.set_u32(a + ".context_length", 32);
  w.set_u32(a + ".embedding_length", 8);
  w.set_u32(a + ".block_count", 1);
  w.set_u32(a + ".feed_forward_length", 16);
  w.set_u32(a + ".attention.head_count", 2);
  w.set_u32(a + ".attention.head_count_kv", 1);
  w.set_u32(a + ".vocab_size", 10);
  std::vector<std::vector<float>> keep;  // tensor bytes must outlive to_bytes()
  auto add = [&](const std::string& name, std::vector<std::int64_t> ne) {
    std::int64_t n = 1;
    for (auto d : ne) n *= d;
    keep.emplace_back(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < keep.back().size(); ++i) keep.back()[i] = 0.05f * rng::normal(keep.size(), i);
    w.add_tensor(name, gguf::GgmlType::F32, ne, std::as_bytes(std::span<const float>(keep.back())));
  };
  add("token_embd.weight", {8, 10});
  add("output_norm.weight", {8});
  add("blk.0.attn_norm.weight", {8});
  if (!drop_some) add("blk.0.attn_q.weight", {8, 8});
  add("blk.0.attn_k.weight", {8, 4});
  add("blk.0.attn_v.weight", {8, 4});
  add("blk.0.attn_output.weight", {8, 8});
  add("blk.0.ffn_norm.weight", {8});
  if (!drop_some) add("blk.0.ffn_gate.weight", {8, 16});
  add("blk.0.ffn_up.weight", {8, 16});
  add("blk.0.ffn_down.weight", {16, 8});
  return w.to_bytes();
}

}  // namespace

TEST(ModelLoad, RunsATinyWrittenModel) {
  auto m = Model::from_reader(gguf::Reader::parse(tiny_file("llama", false)));
  EXPECT_EQ(m.config().n_vocab, 10);
  EXPECT_TRUE(m.weights().tied);
  Context ctx({.threads = 1});
  auto cache = m.new_cache();
  EXPECT_EQ(cache.capacity(), 32);
  const std::int32_t ids[3] = {1, 2, 3};
  auto logits = m.prefill(ctx, cache, ids, 2).to_vector();
  EXPECT_EQ(logits.size(), 10u);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  const std::int32_t bad[1] = {10};
  EXPECT_THROW(m.forward(ctx, cache, bad), Error);
}

TEST(ModelLoad, MissingTensorsAreAllListed) {
  try {
    Model::from_reader(gguf::Reader::parse(tiny_file("llama", true)));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidFile);
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.0.ffn_gate.weight"), std::string::npos) << msg;
  }
}

TEST(ModelLoad, UnsupportedArchitectureIsNamed) {
  try {
    Model::from_reader(gguf::Reader::parse(tiny_file("gpt2", false)));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("gpt2"), std::string::npos);
  }
}
