#include "fucina/quant/traits.hpp"

#include "fucina/quant/dequant_simd.hpp"

#include <array>

#include "fucina/core/error.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/iq4.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/ternary.hpp"

namespace fucina::quant {

namespace {

using Q = QuantType;

// Name and block layout come from the GGUF type table (the block structs assert they match it).
constexpr CodecTraits row(Q type, Q vec_dot_type) {
  const gguf::TypeTraits& g = gguf::type_traits(type);
  return {type, g.name, g.block_size, g.type_size, true, vec_dot_type};
}

constexpr std::array<CodecTraits, 19> kTraits = {{
    row(Q::F32, Q::F32),     row(Q::F16, Q::F16),     row(Q::Q4_0, Q::Q8_0),   row(Q::Q4_1, Q::Q8_1),
    row(Q::Q5_0, Q::Q8_0),   row(Q::Q5_1, Q::Q8_1),   row(Q::Q8_0, Q::Q8_0),   row(Q::Q8_1, Q::Q8_1),
    row(Q::Q2_K, Q::Q8_K),   row(Q::Q3_K, Q::Q8_K),   row(Q::Q4_K, Q::Q8_K),   row(Q::Q5_K, Q::Q8_K),
    row(Q::Q6_K, Q::Q8_K),   row(Q::Q8_K, Q::Q8_K),   row(Q::IQ4_NL, Q::Q8_0), row(Q::IQ4_XS, Q::Q8_K),
    row(Q::BF16, Q::BF16),   row(Q::TQ1_0, Q::Q8_K),  row(Q::TQ2_0, Q::Q8_K),
}};

const CodecTraits* lookup(std::uint32_t id) {
  for (const auto& t : kTraits)
    if (static_cast<std::uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const CodecTraits& checked(QuantType type, std::int64_t n, const char* op) {
  const CodecTraits& t = codec_traits(type);
  FUCINA_CHECK(n >= 0 && n % t.block_size == 0, InvalidArgument,
               "[{}] {} rows must be a multiple of {} elements, got {}", op, t.name, t.block_size, n);
  return t;
}

template <class B>
const B* in(const void* p) {
  return static_cast<const B*>(p);
}
template <class B>
B* out(void* p) {
  return static_cast<B*>(p);
}

}  // namespace

std::optional<CodecTraits> find_codec_traits(std::uint32_t ggml_id) {
  const CodecTraits* t = lookup(ggml_id);
  if (t == nullptr) return std::nullopt;
  return *t;
}

const CodecTraits& codec_traits(QuantType type) {
  const CodecTraits* t = lookup(static_cast<std::uint32_t>(type));
  FUCINA_CHECK(t != nullptr, Unsupported, "[quant] unsupported ggml type id {}",
               static_cast<std::uint32_t>(type));
  return *t;
}

std::int64_t row_bytes(QuantType type, std::int64_t n) {
  checked(type, n, "row_bytes");
  return static_cast<std::int64_t>(gguf::row_size(type, static_cast<std::uint64_t>(n)));
}

void dequantize_row(QuantType type, const void* src, float* dst, std::int64_t n) {
  checked(type, n, "dequantize_row");
  if (dequantize_row_simd(type, src, dst, n)) return;  // bit-identical to the scalar decoders below
  switch (type) {
    case Q::F32: {
      const float* s = in<float>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case Q::F16: return fp16_to_fp32_row(in<f16_bits>(src), dst, n);
    case Q::BF16: return bf16_to_fp32_row(in<bf16_bits>(src), dst, n);
    case Q::Q4_0: return dequantize_row_q4_0(in<BlockQ4_0>(src), dst, n);
    case Q::Q4_1: return dequantize_row_q4_1(in<BlockQ4_1>(src), dst, n);
    case Q::Q5_0: return dequantize_row_q5_0(in<BlockQ5_0>(src), dst, n);
    case Q::Q5_1: return dequantize_row_q5_1(in<BlockQ5_1>(src), dst, n);
    case Q::Q8_0: return dequantize_row_q8_0(in<BlockQ8_0>(src), dst, n);
    case Q::Q8_1: return dequantize_row_q8_1(in<BlockQ8_1>(src), dst, n);
    case Q::Q2_K: return dequantize_row_q2_K(in<BlockQ2_K>(src), dst, n);
    case Q::Q3_K: return dequantize_row_q3_K(in<BlockQ3_K>(src), dst, n);
    case Q::Q4_K: return dequantize_row_q4_K(in<BlockQ4_K>(src), dst, n);
    case Q::Q5_K: return dequantize_row_q5_K(in<BlockQ5_K>(src), dst, n);
    case Q::Q6_K: return dequantize_row_q6_K(in<BlockQ6_K>(src), dst, n);
    case Q::Q8_K: return dequantize_row_q8_K(in<BlockQ8_K>(src), dst, n);
    case Q::IQ4_NL: return dequantize_row_iq4_nl(in<BlockIQ4_NL>(src), dst, n);
    case Q::IQ4_XS: return dequantize_row_iq4_xs(in<BlockIQ4_XS>(src), dst, n);
    case Q::TQ1_0: return dequantize_row_tq1_0(in<BlockTQ1_0>(src), dst, n);
    case Q::TQ2_0: return dequantize_row_tq2_0(in<BlockTQ2_0>(src), dst, n);
    default: break;  // checked() rejected every other type
  }
  FUCINA_ASSERT(false);
}

void quantize_row(QuantType type, const float* src, void* dst, std::int64_t n) {
  checked(type, n, "quantize_row");
  switch (type) {
    case Q::F32: {
      float* d = out<float>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case Q::F16: return fp32_to_fp16_row(src, out<f16_bits>(dst), n);
    case Q::BF16: return fp32_to_bf16_row(src, out<bf16_bits>(dst), n);
    case Q::Q4_0: return quantize_row_q4_0(src, out<BlockQ4_0>(dst), n);
    case Q::Q4_1: return quantize_row_q4_1(src, out<BlockQ4_1>(dst), n);
    case Q::Q5_0: return quantize_row_q5_0(src, out<BlockQ5_0>(dst), n);
    case Q::Q5_1: return quantize_row_q5_1(src, out<BlockQ5_1>(dst), n);
    case Q::Q8_0: return quantize_row_q8_0(src, out<BlockQ8_0>(dst), n);
    case Q::Q8_1: return quantize_row_q8_1(src, out<BlockQ8_1>(dst), n);
    case Q::Q2_K: return quantize_row_q2_K(src, out<BlockQ2_K>(dst), n);
    case Q::Q3_K: return quantize_row_q3_K(src, out<BlockQ3_K>(dst), n);
    case Q::Q4_K: return quantize_row_q4_K(src, out<BlockQ4_K>(dst), n);
    case Q::Q5_K: return quantize_row_q5_K(src, out<BlockQ5_K>(dst), n);
    case Q::Q6_K: return quantize_row_q6_K(src, out<BlockQ6_K>(dst), n);
    case Q::Q8_K: return quantize_row_q8_K(src, out<BlockQ8_K>(dst), n);
    case Q::IQ4_NL: return quantize_row_iq4_nl(src, out<BlockIQ4_NL>(dst), n);
    case Q::IQ4_XS: return quantize_row_iq4_xs(src, out<BlockIQ4_XS>(dst), n);
    case Q::TQ1_0: return quantize_row_tq1_0(src, out<BlockTQ1_0>(dst), n);
    case Q::TQ2_0: return quantize_row_tq2_0(src, out<BlockTQ2_0>(dst), n);
    default: break;  // checked() rejected every other type
  }
  FUCINA_ASSERT(false);
}

void quantize_row_activation(QuantType type, const float* src, void* dst, std::int64_t n) {
  checked(type, n, "quantize_row_activation");
  switch (type) {
    case Q::Q8_0: return quantize_act_q8_0(src, out<BlockQ8_0>(dst), n);
    case Q::Q8_1: return quantize_act_q8_1(src, out<BlockQ8_1>(dst), n);
    case Q::Q8_K:
      if (!quantize_row_q8_K_simd(src, out<BlockQ8_K>(dst), n)) quantize_row_q8_K(src, out<BlockQ8_K>(dst), n);
      return;
    default: break;
  }
  FUCINA_CHECK(false, Unsupported, "[quantize_row_activation] {} is not an activation format",
               codec_traits(type).name);
}

}  // namespace fucina::quant
