#pragma once
// Dense f32 GEMM over strided operands: C[b] = (accumulate ? C[b] : 0) + A[b] * B[b].
//
// Note [sgemm determinism]: every C element is produced by exactly one task, and its
// summation order depends only on the shape (m, n, k), the strides' contiguity class and the
// compiled arm -- never on the thread count or on which thread ran the task. So results are
// bit-identical for any ThreadPool size. They are not bit-identical to sgemm_reference,
// which sums in plain loop order: compare with a tolerance of ~1e-5 * k (relative).
#include <cstdint>

namespace fucina {
class ThreadPool;
}

namespace fucina::kernels {

// C[b,i,j] = (accumulate ? C[b,i,j] : 0) + sum_p A[b,i,p] * B[b,p,j]; every operand has
// arbitrary element strides (bs = batch stride, rs = row stride, cs = column stride; a
// stride may be 0 for broadcast operands A/B; C never aliases A or B).
struct GemmArgs {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* a = nullptr; std::int64_t a_bs = 0, a_rs = 0, a_cs = 1;
  const float* b = nullptr; std::int64_t b_bs = 0, b_rs = 0, b_cs = 1;
  float* c = nullptr;       std::int64_t c_bs = 0, c_rs = 0, c_cs = 1;
  bool accumulate = false;
};

// B given as rows of a decoder instead of memory: B(p, j) = row j of an [n, k] matrix that
// rows() decodes on demand (f16 conversion, block dequantization). The blocked driver asks
// for each k block once per task, so every weight row is decoded once per product when
// the rows of C fit one task. k blocks start at multiples of k_align (a quant block).
struct RowSource {
  // dst[j * kb + p] = B(p0 + p, j0 + j) for j < nj, p < kb.
  void (*rows)(const void* self, std::int64_t j0, std::int64_t nj, std::int64_t p0, std::int64_t kb, float* dst);
  const void* self = nullptr;
  std::int64_t k_align = 1;
};

// C = A * B with B from a RowSource (args.b and its strides are ignored; batch must be 1).
void sgemm_rows(const GemmArgs& args, const RowSource& b, ThreadPool* pool);

// Best compiled arm; pool may be null (serial). Throws fucina::Error(InvalidArgument) on
// negative sizes or null pointers with a non-empty operand.
void sgemm(const GemmArgs& args, ThreadPool* pool);

// The scalar twin: plain loops in (b, i, j, p) order, the oracle for tests.
void sgemm_reference(const GemmArgs& args);

namespace gemm {
// The blocked driver with a chosen micro-kernel arm (arch::scalar is always available;
// others only when listed in compiled_microkernel_arms). For tests and benchmarks.
template <class Arch>
void sgemm_arm(const GemmArgs& args, ThreadPool* pool);
}  // namespace gemm

}  // namespace fucina::kernels
