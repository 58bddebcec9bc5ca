#include "fucina/model/flash_attention.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace fucina::model {

namespace {

inline float h2f(Half h) { return half_to_float(h.bits); }
inline Half f2h(float f) { return Half{float_to_half(f)}; }

}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale) {
  const auto q = contiguous(ctx, q_in);
  const std::int64_t n = q.size<"seq">(), kvh = q.size<"kvh">(), grp = q.size<"grp">(), hd = q.size<"hd">();
  const std::int64_t n_kv = keys.size<"kseq">();
  FUCINA_CHECK(keys.size<"kvh">() == kvh && keys.size<"hd">() == hd && values.size<"kvh">() == kvh &&
                   values.size<"hd">() == hd && values.size<"kseq">() == n_kv,
               ShapeMismatch, "[flash_attention] q has {} kv heads of {} dims, the cache {} of {}", kvh, hd,
               keys.size<"kvh">(), keys.size<"hd">());
  FUCINA_CHECK(n_past >= 0 && n_past + n <= n_kv, InvalidArgument, "[flash_attention] {} past + {} new > {} keys", n_past,
               n, n_kv);
  const RawTensor& kr = keys.raw();
  const RawTensor& vr = values.raw();
  FUCINA_ASSERT(kr.strides[2] == 1 && vr.strides[2] == 1);
  const Half* kp = kr.data<Half>();
  const Half* vp = vr.data<Half>();
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, {n, kvh, grp, hd});
  const float* qp = q.data().data();
  float* op = out.mutable_data().data();
  const std::int64_t rows = n * kvh * grp;
  ctx.pool().parallel_for(rows, [&](std::int64_t r) {
    const std::int64_t i = r / (kvh * grp), h = (r / grp) % kvh;
    std::vector<Half> qh(static_cast<std::size_t>(hd)), acc(static_cast<std::size_t>(hd), Half{0});
    for (std::int64_t d = 0; d < hd; ++d) qh[static_cast<std::size_t>(d)] = f2h(qp[r * hd + d]);
    float m = -std::numeric_limits<float>::infinity(), s_sum = 0.f;
    for (std::int64_t j = 0; j <= n_past + i; ++j) {
      const Half* k = kp + j * kr.strides[0] + h * kr.strides[1];
      const Half* v = vp + j * vr.strides[0] + h * vr.strides[1];
      double dotp = 0.0;  // f16 x f16 products are exact in f32; ggml sums them in double
      for (std::int64_t d = 0; d < hd; ++d) dotp += static_cast<double>(h2f(k[d]) * h2f(qh[static_cast<std::size_t>(d)]));
      const float s = static_cast<float>(dotp) * scale;
      float ms = 1.f, vs = 1.f;
      if (s > m) {
        const float m_old = m;
        m = s;
        ms = std::exp(m_old - m);
        for (auto& a : acc) a = f2h(h2f(a) * ms);
      } else {
        vs = std::exp(s - m);
      }
      for (std::int64_t d = 0; d < hd; ++d) {
        Half& a = acc[static_cast<std::size_t>(d)];
        a = f2h(std::fma(h2f(v[d]), vs, h2f(a)));
      }
      s_sum = std::fma(s_sum, ms, vs);
    }
    const float inv = s_sum == 0.f ? 0.f : 1.f / s_sum;
    for (std::int64_t d = 0; d < hd; ++d) op[r * hd + d] = h2f(acc[static_cast<std::size_t>(d)]) * inv;
  });
  return out;
}

}  // namespace fucina::model
