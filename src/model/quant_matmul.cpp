#include "fucina/model/quant_matmul.hpp"

#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/quant/vec_dot.hpp"

namespace fucina::model {

void matmul_quant(ThreadPool& pool, const float* x, std::int64_t n_rows, const QuantMatrix& w, float* y) {
  const auto& traits = quant::type_traits(w.type);
  const quant::QuantType act_type = traits.vec_dot_type;
  const std::int64_t k = w.cols;
  const std::int64_t act_bytes = quant::row_bytes(act_type, k);
  std::vector<std::byte> act(static_cast<std::size_t>(act_bytes * n_rows));
  pool.parallel_for(n_rows, [&](std::int64_t r) {
    quant::quantize_row_activation(act_type, x + r * k, act.data() + r * act_bytes, k);
  });
  const quant::DotFn dot = quant::dot_kernel(quant::best_dot_arm(), w.type);
  FUCINA_CHECK(dot != nullptr, Unsupported, "[matmul] no dot kernel for {}", traits.name);
  // Tasks are blocks of output rows; each task covers every input row (weights stream once).
  constexpr std::int64_t kRowsPerTask = 16;
  const std::int64_t tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(tasks, [&](std::int64_t t) {
    const std::int64_t o0 = t * kRowsPerTask, o1 = std::min(w.rows, o0 + kRowsPerTask);
    for (std::int64_t r = 0; r < n_rows; ++r) {
      const std::byte* a = act.data() + r * act_bytes;
      for (std::int64_t o = o0; o < o1; ++o) y[r * w.rows + o] = dot(k, w.row(o), a);
    }
  });
}

void gather_quant_rows(const QuantMatrix& w, const std::int32_t* ids, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    FUCINA_CHECK(ids[i] >= 0 && ids[i] < w.rows, IndexOutOfBounds, "[embed] token id {} is outside 0..{}", ids[i],
                 w.rows - 1);
    quant::dequantize_row(w.type, w.row(ids[i]), out + i * w.cols, w.cols);
  }
}

}  // namespace fucina::model
