#pragma once
// Private per-arm kernel declarations; the public face is fucina/quant/vec_dot.hpp.
#include <cstdint>

#include "fucina/quant/vec_dot.hpp"

namespace fucina::quant::detail {

// One table of kernels per arm, indexed like kDotTypes.
inline constexpr QuantType kDotTypes[] = {
    QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1, QuantType::Q8_0,
    QuantType::IQ4_NL, QuantType::Q2_K, QuantType::Q3_K, QuantType::Q4_K, QuantType::Q5_K,
    QuantType::Q6_K, QuantType::IQ4_XS, QuantType::TQ1_0, QuantType::TQ2_0};
inline constexpr int kNumDotTypes = sizeof(kDotTypes) / sizeof(kDotTypes[0]);

struct DotTable {
  DotFn fn[kNumDotTypes];
};

float dot_q4_0_scalar(std::int64_t n, const void* w, const void* a);
float dot_q4_1_scalar(std::int64_t n, const void* w, const void* a);
float dot_q5_0_scalar(std::int64_t n, const void* w, const void* a);
float dot_q5_1_scalar(std::int64_t n, const void* w, const void* a);
float dot_q8_0_scalar(std::int64_t n, const void* w, const void* a);
float dot_iq4_nl_scalar(std::int64_t n, const void* w, const void* a);
float dot_q2_K_scalar(std::int64_t n, const void* w, const void* a);
float dot_q3_K_scalar(std::int64_t n, const void* w, const void* a);
float dot_q4_K_scalar(std::int64_t n, const void* w, const void* a);
float dot_q5_K_scalar(std::int64_t n, const void* w, const void* a);
float dot_q6_K_scalar(std::int64_t n, const void* w, const void* a);
float dot_iq4_xs_scalar(std::int64_t n, const void* w, const void* a);
float dot_tq1_0_scalar(std::int64_t n, const void* w, const void* a);
float dot_tq2_0_scalar(std::int64_t n, const void* w, const void* a);

// Defined in vec_dot_x86.cpp; nullptr when the arm is compiled out.
const DotTable* avx2_dot_table();
const DotTable* avx512vnni_dot_table();
// Multi-row kernels of the AVX512-VNNI arm (Note [Multi-row dots]); nullptr when absent.
DotRowsFn avx512vnni_rows_kernel(QuantType type);

}  // namespace fucina::quant::detail
