#pragma once
// Untagged contraction: the one GEMM path behind dot and einsum. Axes are grouped into
// batch (in A, B and C), m (A and C), n (B and C) and k (A and B, summed). Each group
// is merged into one strided dimension when the operand's layout allows; otherwise the
// operand is first copied into [batch.., m|k.., k|n..] order (the C side is computed in
// a temporary and copied out), so every contraction lands on kernels::sgemm.
#include <array>

#include "fucina/core/context.hpp"
#include "fucina/core/raw_tensor.hpp"

namespace fucina::raw {

struct ContractSpec {
  struct Group {
    int count = 0;
    std::array<int, kMaxRank> a{}, b{}, c{};  // axis index per operand (unused sides ignored)
  };
  Group batch;  // a, b, c
  Group m;      // a, c
  Group n;      // b, c
  Group k;      // a, b
};

// c must be allocated with the right shape; overwritten unless accumulate.
void contract(Context& ctx, const RawTensor& a, const RawTensor& b, RawTensor& c, const ContractSpec& spec,
              bool accumulate = false);

}  // namespace fucina::raw
