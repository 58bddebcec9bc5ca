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
