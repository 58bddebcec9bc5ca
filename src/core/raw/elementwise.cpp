#include "fucina/core/raw/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "fucina/core/error.hpp"
#include "fucina/core/raw/strided.hpp"
#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif
#if FUCINA_ARCH_SIMD
#include <xsimd/xsimd.hpp>
#endif

namespace fucina::raw {

// f32 -> f16, nearest even (what store_from_float<Half> does one element at a time).
void f32_to_f16_run(const float* s, Half* d, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_AVX512
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) d[i] = Half{float_to_half(s[i])};
}

namespace {

// Each op is written once over V = float or an xsimd batch, so the scalar twin and the
// SIMD arm share their formula (they differ only in libm vs xsimd polynomials).
template <class V>
V vmax(V a, V b) {
  if constexpr (std::is_same_v<V, float>) return std::max(a, b);
#if FUCINA_ARCH_SIMD
  else return xsimd::max(a, b);
#endif
}
template <class V>
V vmin(V a, V b) {
  if constexpr (std::is_same_v<V, float>) return std::min(a, b);
#if FUCINA_ARCH_SIMD
  else return xsimd::min(a, b);
#endif
}
template <class V>
V vselect_pos(V x, V a, V b) {  // x > 0 ? a : b
  if constexpr (std::is_same_v<V, float>) return x > 0.f ? a : b;
#if FUCINA_ARCH_SIMD
  else return xsimd::select(x > V(0.f), a, b);
#endif
}

template <class V>
V apply_unary(UnaryOp op, V x, float p0, float p1) {
  using std::abs, std::exp, std::log, std::tanh, std::sqrt, std::erf, std::pow;
#if FUCINA_ARCH_SIMD
  using xsimd::abs, xsimd::exp, xsimd::log, xsimd::tanh, xsimd::sqrt, xsimd::erf, xsimd::pow;
#endif
  const V one(1.f);
  switch (op) {
    case UnaryOp::exp: return exp(x);
    case UnaryOp::log: return log(x);
    case UnaryOp::tanh: return tanh(x);
    case UnaryOp::sigmoid: return one / (one + exp(-x));
    case UnaryOp::silu: return x / (one + exp(-x));
    case UnaryOp::gelu: return V(0.5f) * x * (one + erf(x * V(0.70710678118654752f)));
    case UnaryOp::relu: return vmax(x, V(0.f));
    case UnaryOp::sqrt: return sqrt(x);
    case UnaryOp::rsqrt: return one / sqrt(x);
    case UnaryOp::neg: return -x;
    case UnaryOp::abs: return abs(x);
    case UnaryOp::square: return x * x;
    case UnaryOp::pow: return pow(x, V(p0));
    case UnaryOp::clamp: return vmin(vmax(x, V(p0)), V(p1));
    case UnaryOp::add_scalar: return x + V(p0);
    case UnaryOp::mul_scalar: return x * V(p0);
    case UnaryOp::step: return vselect_pos(x, one, V(0.f));
  }
  return x;
}

template <class V>
V apply_binary(BinaryOp op, V a, V b) {
  using std::pow;
#if FUCINA_ARCH_SIMD
  using xsimd::pow;
#endif
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::maximum: return vmax(a, b);
    case BinaryOp::minimum: return vmin(a, b);
    case BinaryOp::pow: return pow(a, b);
  }
  return a;
}

// Long single rows are split so one big op uses every core.
template <class F>
void for_each_row_split(Context& ctx, Layout<3>& l, F&& row) {
  if (l.rank == 1 && l.shape[0] >= (1 << 16) && ctx.threads() > 1) {
    const std::int64_t n = l.shape[0];
    ctx.pool().parallel_range(n, 1 << 14, [&](std::int64_t b, std::int64_t e) {
      row(std::array<std::int64_t, 3>{b * l.strides[0][0], b * l.strides[1][0], b * l.strides[2][0]}, e - b,
          std::array<std::int64_t, 3>{l.strides[0][0], l.strides[1][0], l.strides[2][0]});
    });
    return;
  }
  const std::array<std::int64_t, 3> inner{l.strides[0][l.rank - 1], l.strides[1][l.rank - 1],
                                          l.strides[2][l.rank - 1]};
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 3>& off, std::int64_t len) { row(off, len, inner); });
}

Layout<3> layout_of(const RawTensor& out, const RawTensor& a, const RawTensor& b) {
  Layout<3> l;
  l.rank = out.rank;
  l.shape = out.shape;
  l.strides = {out.strides, a.strides, b.strides};
  return collapse(l);
}

void check_f32(const RawTensor& t, std::string_view op) {
  FUCINA_CHECK(t.dtype == DType::f32, InvalidArgument, "[{}] expects f32 operands, got {}", op,
               dtype_name(t.dtype));
}

}  // namespace

std::string_view to_string(UnaryOp op) {
  constexpr std::string_view names[] = {"exp",  "log", "tanh", "sigmoid", "silu",  "gelu",       "relu",       "sqrt",
                                        "rsqrt", "neg", "abs",  "square",  "pow", "clamp", "add_scalar", "mul_scalar", "step"};
  return names[static_cast<int>(op)];
}
std::string_view to_string(BinaryOp op) {
  constexpr std::string_view names[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
  return names[static_cast<int>(op)];
}

void unary_reference(UnaryOp op, const float* x, float* y, std::int64_t n, float p0, float p1) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = apply_unary<float>(op, x[i], p0, p1);
}

void binary_reference(BinaryOp op, const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = apply_binary<float>(op, a[i], b[i]);
}

void unary_contiguous(UnaryOp op, const float* x, float* y, std::int64_t n, float p0, float p1) {
  std::int64_t i = 0;
#if FUCINA_ARCH_SIMD
  using B = xsimd::batch<float>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  for (; i + W <= n; i += W) apply_unary<B>(op, B::load_unaligned(x + i), p0, p1).store_unaligned(y + i);
#endif
  for (; i < n; ++i) y[i] = apply_unary<float>(op, x[i], p0, p1);
}

void binary_contiguous(BinaryOp op, const float* a, const float* b, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_SIMD
  using B = xsimd::batch<float>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  for (; i + W <= n; i += W)
    apply_binary<B>(op, B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(y + i);
#endif
  for (; i < n; ++i) y[i] = apply_binary<float>(op, a[i], b[i]);
}

void unary(Context& ctx, UnaryOp op, const RawTensor& x, RawTensor& out, float p0, float p1) {
  check_f32(x, to_string(op));
  check_f32(out, to_string(op));
  Layout<3> l = layout_of(out, x, x);
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  for_each_row_split(ctx, l, [&](const std::array<std::int64_t, 3>& off, std::int64_t len,
                                 const std::array<std::int64_t, 3>& st) {
    if (st[0] == 1 && st[1] == 1) {
      unary_contiguous(op, xs + off[1], ys + off[0], len, p0, p1);
    } else {
      for (std::int64_t i = 0; i < len; ++i)
        ys[off[0] + i * st[0]] = apply_unary<float>(op, xs[off[1] + i * st[1]], p0, p1);
    }
  });
}

void binary(Context& ctx, BinaryOp op, const RawTensor& a, const RawTensor& b, RawTensor& out) {
  check_f32(a, to_string(op));
  check_f32(b, to_string(op));
  check_f32(out, to_string(op));
  Layout<3> l = layout_of(out, a, b);
  const float* as = a.data<float>();
  const float* bs = b.data<float>();
  float* ys = out.data<float>();
  for_each_row_split(ctx, l, [&](const std::array<std::int64_t, 3>& off, std::int64_t len,
                                 const std::array<std::int64_t, 3>& st) {
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      binary_contiguous(op, as + off[1], bs + off[2], ys + off[0], len);
      return;
    }
#if FUCINA_ARCH_SIMD
    if (st[0] == 1 && (st[1] == 1 || st[1] == 0) && (st[2] == 1 || st[2] == 0)) {
      using B = xsimd::batch<float>;
      constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
      const float* pa = as + off[1];
      const float* pb = bs + off[2];
      float* py = ys + off[0];
      std::int64_t i = 0;
      for (; i + W <= len; i += W) {
        B va = st[1] ? B::load_unaligned(pa + i) : B(*pa);
        B vb = st[2] ? B::load_unaligned(pb + i) : B(*pb);
        apply_binary<B>(op, va, vb).store_unaligned(py + i);
      }
      for (; i < len; ++i) py[i] = apply_binary<float>(op, pa[i * st[1]], pb[i * st[2]]);
      return;
    }
#endif
    for (std::int64_t i = 0; i < len; ++i)
      ys[off[0] + i * st[0]] = apply_binary<float>(op, as[off[1] + i * st[1]], bs[off[2] + i * st[2]]);
  });
}

void where(Context& ctx, const RawTensor& cond, const RawTensor& a, const RawTensor& b, RawTensor& out) {
  check_f32(cond, "where");
  check_f32(a, "where");
  check_f32(b, "where");
  Layout<4> l;
  l.rank = out.rank;
  l.shape = out.shape;
  l.strides = {out.strides, cond.strides, a.strides, b.strides};
  l = collapse(l);
  const float* c = cond.data<float>();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* y = out.data<float>();
  const int r = l.rank - 1;
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 4>& off, std::int64_t len) {
    for (std::int64_t i = 0; i < len; ++i)
      y[off[0] + i * l.strides[0][r]] = c[off[1] + i * l.strides[1][r]] != 0.f ? pa[off[2] + i * l.strides[2][r]]
                                                                              : pb[off[3] + i * l.strides[3][r]];
  });
}

namespace {
template <class T>
float load_as_float(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return bf16_to_float(v.bits);
  else return static_cast<float>(v);
}
template <class T>
void store_from_float(std::byte* p, float f) {
  T v;
  if constexpr (std::is_same_v<T, Half>) v.bits = float_to_half(f);
  else if constexpr (std::is_same_v<T, BFloat16>) v.bits = float_to_bf16(f);
  else if constexpr (std::is_same_v<T, std::int32_t>) v = static_cast<std::int32_t>(std::lrint(f));
  else v = f;
  std::memcpy(p, &v, sizeof(T));
}
template <class F>
void visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(Half{}); break;
    case DType::bf16: f(BFloat16{}); break;
    case DType::i32: f(std::int32_t{}); break;
  }
}
}  // namespace

void copy(Context& ctx, const RawTensor& src, RawTensor& dst) {
  FUCINA_CHECK(src.rank == dst.rank, ShapeMismatch, "[copy] rank {} vs {}", src.rank, dst.rank);
  for (int i = 0; i < src.rank; ++i)
    FUCINA_CHECK(src.shape[i] == dst.shape[i], ShapeMismatch, "[copy] axis {} is {} in the source, {} in the destination",
                 i, src.shape[i], dst.shape[i]);
  Layout<2> l;
  l.rank = dst.rank;
  l.shape = dst.shape;
  l.strides = {dst.strides, src.strides};
  l = collapse(l);
  const int r = l.rank - 1;
  const std::int64_t sd = l.strides[0][r], ss = l.strides[1][r];
  const std::size_t esd = dtype_size(dst.dtype), ess = dtype_size(src.dtype);
  std::byte* dbase = dst.buf.bytes() + dst.offset * static_cast<std::int64_t>(esd);
  const std::byte* sbase = src.buf.bytes() + src.offset * static_cast<std::int64_t>(ess);
  if (src.dtype == dst.dtype) {
    for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t len) {
      std::byte* d = dbase + off[0] * static_cast<std::int64_t>(esd);
      const std::byte* s = sbase + off[1] * static_cast<std::int64_t>(ess);
      if (sd == 1 && ss == 1) {
        std::memcpy(d, s, static_cast<std::size_t>(len) * esd);
      } else {
        for (std::int64_t i = 0; i < len; ++i)
          std::memcpy(d + i * sd * static_cast<std::int64_t>(esd), s + i * ss * static_cast<std::int64_t>(ess), esd);
      }
    });
    return;
  }
  if (sd == 1 && ss == 1 && src.dtype == DType::f32 && dst.dtype == DType::f16) {
    // A KV-cache store: vectorized runs, split over the pool. One contiguous run (a
    // position-major cache) or one per head row (kv_cache.hpp Note [Head-major KV]).
    const auto* s = reinterpret_cast<const float*>(sbase);
    auto* d = reinterpret_cast<Half*>(dbase);
    if (l.rank == 1)
      ctx.pool().parallel_range(l.shape[0], 1 << 15, [&](std::int64_t b, std::int64_t e) { f32_to_f16_run(s + b, d + b, e - b); });
    else
      for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t len) {
        f32_to_f16_run(s + off[1], d + off[0], len);
      });
    return;
  }
  visit_dtype(src.dtype, [&](auto s_tag) {
    visit_dtype(dst.dtype, [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t len) {
        for (std::int64_t i = 0; i < len; ++i)
          store_from_float<D>(dbase + (off[0] + i * sd) * static_cast<std::int64_t>(sizeof(D)),
                              load_as_float<S>(sbase + (off[1] + i * ss) * static_cast<std::int64_t>(sizeof(S))));
      });
    });
  });
}

void fill(Context& ctx, RawTensor& dst, float value) {
  Layout<1> l;
  l.rank = dst.rank;
  l.shape = dst.shape;
  l.strides = {dst.strides};
  l = collapse(l);
  const int r = l.rank - 1;
  const std::size_t es = dtype_size(dst.dtype);
  std::byte* base = dst.buf.bytes() + dst.offset * static_cast<std::int64_t>(es);
  visit_dtype(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::byte one[sizeof(T)];
    store_from_float<T>(one, value);
    for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 1>& off, std::int64_t len) {
      for (std::int64_t i = 0; i < len; ++i)
        std::memcpy(base + (off[0] + i * l.strides[0][r]) * static_cast<std::int64_t>(es), one, es);
    });
  });
}

}  // namespace fucina::raw
