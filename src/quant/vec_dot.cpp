#include "fucina/quant/vec_dot.hpp"

#include "fucina/core/error.hpp"
#include "vec_dot_arms.hpp"

namespace fucina::quant {

namespace {

using namespace detail;

constexpr DotTable kScalarTable = {{dot_q4_0_scalar, dot_q4_1_scalar, dot_q5_0_scalar,
                                    dot_q5_1_scalar, dot_q8_0_scalar, dot_iq4_nl_scalar,
                                    dot_q2_K_scalar, dot_q3_K_scalar, dot_q4_K_scalar,
                                    dot_q5_K_scalar, dot_q6_K_scalar, dot_iq4_xs_scalar,
                                    dot_tq1_0_scalar, dot_tq2_0_scalar}};

const DotTable* table(DotArm arm) {
  switch (arm) {
    case DotArm::Scalar: return &kScalarTable;
    case DotArm::Avx2: return avx2_dot_table();
    case DotArm::Avx512Vnni: return avx512vnni_dot_table();
  }
  return nullptr;
}

int type_index(QuantType t) {
  for (int i = 0; i < kNumDotTypes; ++i)
    if (kDotTypes[i] == t) return i;
  return -1;
}

const DotTable& best_table() {
  static const DotTable* t = table(best_dot_arm());
  return *t;
}

constexpr int idx(QuantType t) {
  for (int i = 0; i < kNumDotTypes; ++i)
    if (kDotTypes[i] == t) return i;
  return -1;
}

}  // namespace

bool dot_arm_compiled(DotArm arm) { return table(arm) != nullptr; }

DotArm best_dot_arm() {
  if (dot_arm_compiled(DotArm::Avx512Vnni)) return DotArm::Avx512Vnni;
  if (dot_arm_compiled(DotArm::Avx2)) return DotArm::Avx2;
  return DotArm::Scalar;
}

DotFn dot_kernel(DotArm arm, QuantType weight_type) {
  const DotTable* t = table(arm);
  const int i = type_index(weight_type);
  return t == nullptr || i < 0 ? nullptr : t->fn[i];
}

DotRowsFn dot_rows_kernel(QuantType weight_type) {
  return best_dot_arm() == DotArm::Avx512Vnni ? detail::avx512vnni_rows_kernel(weight_type) : nullptr;
}

float vec_dot(QuantType weight_type, std::int64_t n, const void* w_row, const void* act_row) {
  const int i = type_index(weight_type);
  FUCINA_CHECK(i >= 0, Unsupported, "[vec_dot] no dot kernel for {}", codec_traits(weight_type).name);
  const CodecTraits& t = codec_traits(weight_type);
  FUCINA_CHECK(n >= 0 && n % t.block_size == 0, InvalidArgument,
               "[vec_dot] {} rows must be a multiple of {} elements, got {}", t.name, t.block_size, n);
  return best_table().fn[i](n, w_row, act_row);
}

float vec_dot_q4_0_q8_0(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q4_0)](n, w, a); }
float vec_dot_q4_1_q8_1(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q4_1)](n, w, a); }
float vec_dot_q5_0_q8_0(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q5_0)](n, w, a); }
float vec_dot_q5_1_q8_1(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q5_1)](n, w, a); }
float vec_dot_q8_0_q8_0(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q8_0)](n, w, a); }
float vec_dot_iq4_nl_q8_0(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::IQ4_NL)](n, w, a); }
float vec_dot_q2_K_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q2_K)](n, w, a); }
float vec_dot_q3_K_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q3_K)](n, w, a); }
float vec_dot_q4_K_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q4_K)](n, w, a); }
float vec_dot_q5_K_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q5_K)](n, w, a); }
float vec_dot_q6_K_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::Q6_K)](n, w, a); }
float vec_dot_iq4_xs_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::IQ4_XS)](n, w, a); }
float vec_dot_tq1_0_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::TQ1_0)](n, w, a); }
float vec_dot_tq2_0_q8_K(std::int64_t n, const void* w, const void* a) { return best_table().fn[idx(QuantType::TQ2_0)](n, w, a); }

}  // namespace fucina::quant
