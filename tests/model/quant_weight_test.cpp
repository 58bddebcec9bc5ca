// Quantized weights in inference: the matmul is exactly the ggml pairing's dot kernel over
// int8-quantized activations, and a quantized model tracks its f32 original.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <unistd.h>
#include <vector>

#include "fucina/model/model.hpp"
#include "fucina/model/quant_matmul.hpp"
#include "fucina/quant/quantize_model.hpp"
#include "fucina/quant/vec_dot.hpp"
#include "support/shared_dir.hpp"

using namespace fucina;

namespace {

model::QuantMatrix quantize_matrix(quant::QuantType type, const std::vector<float>& w, std::int64_t rows, std::int64_t cols,
                                   std::vector<std::byte>& storage) {
  const std::int64_t rb = quant::row_bytes(type, cols);
  storage.assign(static_cast<std::size_t>(rb * rows), std::byte{0});
  for (std::int64_t r = 0; r < rows; ++r) quant::quantize_row(type, w.data() + r * cols, storage.data() + r * rb, cols);
  model::QuantMatrix q;
  q.data = storage.data();
  q.type = type;
  q.rows = rows;
  q.cols = cols;
  q.row_bytes = rb;
  return q;
}

}  // namespace

TEST(QuantMatmul, EqualsThePairedDotKernelAndTracksF32) {
  Context ctx({.threads = 2});
  const std::int64_t rows = 40, cols = 512, n = 3;
  const auto w = Tensor<"o", "i">::randn(ctx, {rows, cols}, 5).to_vector();
  const auto x = Tensor<"n", "i">::randn(ctx, {n, cols}, 6).to_vector();
  for (auto type : {quant::QuantType::Q8_0, quant::QuantType::Q4_0, quant::QuantType::Q4_K, quant::QuantType::Q6_K}) {
    std::vector<std::byte> storage;
    const auto q = quantize_matrix(type, w, rows, cols, storage);
    std::vector<float> y(static_cast<std::size_t>(n * rows));
    model::matmul_quant(ctx.pool(), x.data(), n, q, y.data());
    const auto act_type = quant::codec_traits(type).vec_dot_type;
    const std::int64_t ab = quant::row_bytes(act_type, cols);
    std::vector<std::byte> act(static_cast<std::size_t>(ab));
    std::vector<float> wd(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < n; ++r) {
      quant::quantize_row_activation(act_type, x.data() + r * cols, act.data(), cols);
      for (std::int64_t o = 0; o < rows; ++o) {
        // Exactly the pairing's kernel on the quantized activation row.
        EXPECT_EQ(y[static_cast<std::size_t>(r * rows + o)], quant::vec_dot(type, cols, q.row(o), act.data()));
        // And close to the f32 product with the decoded weights (activation rounding only).
        quant::dequantize_row(type, q.row(o), wd.data(), cols);
        double ref = 0, mag = 0;
        for (std::int64_t i = 0; i < cols; ++i) {
          ref += double(x[static_cast<std::size_t>(r * cols + i)]) * wd[static_cast<std::size_t>(i)];
          mag += std::fabs(double(x[static_cast<std::size_t>(r * cols + i)]) * wd[static_cast<std::size_t>(i)]);
        }
        EXPECT_NEAR(y[static_cast<std::size_t>(r * rows + o)], ref, 0.01 * mag) << quant::codec_traits(type).name;
      }
    }
  }
}

// With fast_prefill, many activation rows take the GEMM path (Note [Quantized GEMM]): it must equal the int8
// pairing's dot up to f32 summation order, for every format family and partial tiles.
TEST(QuantMatmul, GemmPathMatchesTheDotKernel) {
  Context ctx({.threads = 2});
  const std::int64_t rows = 70, cols = 512, n = 37;
  const auto w = Tensor<"o", "i">::randn(ctx, {rows, cols}, 7).to_vector();
  const auto x = Tensor<"n", "i">::randn(ctx, {n, cols}, 8).to_vector();
  for (auto type : {quant::QuantType::Q8_0, quant::QuantType::Q4_0, quant::QuantType::Q4_1, quant::QuantType::Q5_1,
                    quant::QuantType::Q2_K, quant::QuantType::Q4_K, quant::QuantType::Q6_K, quant::QuantType::IQ4_NL}) {
    std::vector<std::byte> storage;
    auto q = quantize_matrix(type, w, rows, cols, storage);
    q.fast_prefill = true;
    std::vector<float> y(static_cast<std::size_t>(n * rows));
    model::matmul_quant(ctx.pool(), x.data(), n, q, y.data());
    const auto act_type = quant::codec_traits(type).vec_dot_type;
    std::vector<std::byte> act(static_cast<std::size_t>(quant::row_bytes(act_type, cols)));
    std::vector<float> wd(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < n; ++r) {
      quant::quantize_row_activation(act_type, x.data() + r * cols, act.data(), cols);
      for (std::int64_t o = 0; o < rows; ++o) {
        quant::dequantize_row(type, q.row(o), wd.data(), cols);
        double mag = 0;
        for (std::int64_t i = 0; i < cols; ++i) mag += std::fabs(double(x[static_cast<std::size_t>(r * cols + i)]) * wd[static_cast<std::size_t>(i)]);
        // Q8_1 pairings (Q4_1, Q5_1) also differ by the block sum ggml keeps in f16.
        const double tol = (act_type == quant::QuantType::Q8_1 ? 1e-3 : 2e-6) * mag;
        ASSERT_NEAR(y[static_cast<std::size_t>(r * rows + o)], quant::vec_dot(type, cols, q.row(o), act.data()), tol)
            << quant::codec_traits(type).name << " r=" << r << " o=" << o;
      }
    }
  }
}

// One PackedActivations shared by products of one input (SharedInput: q/k/v, gate/up)
// across weight formats of both activation formats gives each product's own result, also
// when one-row arithmetic splits the rows (the shared encoding is read at an offset).
TEST(QuantMatmul, SharedPackedActivationsEqualOwnEncodings) {
  if (!quant::packed_fast_arm_compiled()) GTEST_SKIP() << "no packed kernel arm in this build (weights stay unpacked)";
  Context ctx({.threads = 2});
  const std::int64_t rows = 48, cols = 512, n = 9;
  const auto w = Tensor<"o", "i">::randn(ctx, {rows, cols}, 11).to_vector();
  const auto x = Tensor<"n", "i">::randn(ctx, {n, cols}, 12).to_vector();
  const quant::QuantType types[] = {quant::QuantType::Q4_0, quant::QuantType::Q4_K, quant::QuantType::Q8_0,
                                    quant::QuantType::Q6_K};
  std::vector<std::vector<std::byte>> storage(std::size(types));
  std::vector<model::QuantMatrix> qs;
  for (std::size_t t = 0; t < std::size(types); ++t) {
    auto q = quantize_matrix(types[t], w, rows, cols, storage[t]);
    q.packed = std::make_shared<const quant::PackedMatrix>(quant::pack_matrix(q.type, q.data, rows, cols, q.row_bytes));
    qs.push_back(std::move(q));
  }
  for (const std::int64_t one_row : {std::int64_t{0}, std::int64_t{4}}) {
    model::OneRowArithmetic guard(one_row);
    model::PackedActivations shared;
    for (const auto& q : qs) {
      std::vector<float> own(static_cast<std::size_t>(n * rows)), via(own.size());
      model::matmul_quant(ctx.pool(), x.data(), n, q, own.data());
      model::matmul_quant(ctx.pool(), x.data(), n, q, via.data(), &shared);
      EXPECT_EQ(own, via) << quant::codec_traits(q.type).name << " one-row rows " << one_row;
    }
  }
}

TEST(QuantModel, Q8_0ModelTracksItsF32Original) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto src = shared / "models" / "tiny-llama-spm-f32.gguf";
  const auto dst = std::filesystem::temp_directory_path() / ("fucina_q8_" + std::to_string(::getpid()) + ".gguf");
  quant::QuantizeOptions opt;
  opt.ftype = quant::FileType::MostlyQ8_0;
  quant::quantize_model(src, dst, opt);
  const auto f32 = model::Model::load(src);
  const auto q8 = model::Model::load(dst);
  Context ctx({.threads = 2});
  const std::vector<std::int32_t> ids{1, 15043, 3186, 29892, 920, 526, 366};
  auto c1 = f32.new_cache(64);
  auto c2 = q8.new_cache(64);
  const auto a = f32.prefill(ctx, c1, ids).to_vector();
  const auto b = q8.prefill(ctx, c2, ids).to_vector();
  std::filesystem::remove(dst);
  double dot = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) dot += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  EXPECT_GT(dot / std::sqrt(na * nb), 0.999);
  EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), std::max_element(b.begin(), b.end()) - b.begin());
}
