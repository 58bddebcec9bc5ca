// Scalar twins of the dot kernels (the reference every SIMD arm must match bit for bit).
#include <cstring>

#include "dot_common.hpp"
#include "vec_dot_arms.hpp"

namespace fucina::quant::detail {

namespace {


int q5_bit(const std::uint8_t* qh4, int j) {
  std::uint32_t qh = 0;
  std::memcpy(&qh, qh4, 4);
  return static_cast<int>((qh >> j) & 1u) << 4;
}

}  // namespace

float dot_q8_0_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ8_0*>(wp);
  const auto* a = static_cast<const BlockQ8_0*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * a[b].qs[j];
    acc.add(b, contrib_sym(isum, scale_q8_0(w[b].d, a[b].d)));
  }
  return acc.reduce();
}

float dot_q4_0_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ4_0*>(wp);
  const auto* a = static_cast<const BlockQ8_0*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w[b].qs[j] & 0xF) - 8) * a[b].qs[j];
      isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
    }
    acc.add(b, contrib_sym(isum, scale_q8_0(w[b].d, a[b].d)));
  }
  return acc.reduce();
}

float dot_q5_0_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ5_0*>(wp);
  const auto* a = static_cast<const BlockQ8_0*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (((w[b].qs[j] & 0xF) | q5_bit(w[b].qh, j)) - 16) * a[b].qs[j];
      isum += (((w[b].qs[j] >> 4) | q5_bit(w[b].qh, j + 16)) - 16) * a[b].qs[j + 16];
    }
    acc.add(b, contrib_sym(isum, scale_q8_0(w[b].d, a[b].d)));
  }
  return acc.reduce();
}

float dot_iq4_nl_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockIQ4_NL*>(wp);
  const auto* a = static_cast<const BlockQ8_0*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += kIq4nlValues[w[b].qs[j] & 0xF] * a[b].qs[j];
      isum += kIq4nlValues[w[b].qs[j] >> 4] * a[b].qs[j + 16];
    }
    acc.add(b, contrib_sym(isum, scale_q8_0(w[b].d, a[b].d)));
  }
  return acc.reduce();
}

float dot_q4_1_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ4_1*>(wp);
  const auto* a = static_cast<const BlockQ8_1*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (w[b].qs[j] & 0xF) * a[b].qs[j];
      isum += (w[b].qs[j] >> 4) * a[b].qs[j + 16];
    }
    acc.add(b, contrib_q8_1(isum, w[b], a[b]));
  }
  return acc.reduce();
}

float dot_q5_1_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ5_1*>(wp);
  const auto* a = static_cast<const BlockQ8_1*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w[b].qs[j] & 0xF) | q5_bit(w[b].qh, j)) * a[b].qs[j];
      isum += ((w[b].qs[j] >> 4) | q5_bit(w[b].qh, j + 16)) * a[b].qs[j + 16];
    }
    acc.add(b, contrib_q8_1(isum, w[b], a[b]));
  }
  return acc.reduce();
}

// The K twins sum each 16- or 32-element sub-block first, then apply its integer scale.
float dot_q2_K_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ2_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const std::int8_t* q8 = a[b].qs;
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          int sub = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            sub += ((w[b].qs[32 * h + l] >> (2 * j)) & 3) * q8[128 * h + 32 * j + l];
          isum += (w[b].scales[8 * h + 2 * j + half] & 0xF) * sub;
        }
      }
    }
    acc.add(b, contrib_k_min(isum, q2k_min_sum(w[b], a[b]), w[b].d, w[b].dmin, a[b].d));
  }
  return acc.reduce();
}

float dot_q3_K_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ3_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const std::int8_t* q8 = a[b].qs;
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          int sub = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int low = (w[b].qs[32 * h + l] >> (2 * j)) & 3;
            const int q = low - (((w[b].hmask[l] >> (4 * h + j)) & 1) ? 0 : 4);
            sub += q * q8[128 * h + 32 * j + l];
          }
          isum += unpack_scale_q3_k(8 * h + 2 * j + half, w[b].scales) * sub;
        }
      }
    }
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

namespace {

// Shared by Q4_K and Q5_K: qh == nullptr for Q4_K.
int q45_isum(const std::uint8_t* qs, const std::uint8_t* qh, const int* sc, const std::int8_t* q8) {
  int isum = 0;
  for (int k = 0; k < 4; ++k) {
    int s0 = 0, s1 = 0;
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * k + l] & 0xF;
      int hi = qs[32 * k + l] >> 4;
      if (qh != nullptr) {
        lo |= ((qh[l] >> (2 * k)) & 1) << 4;
        hi |= ((qh[l] >> (2 * k + 1)) & 1) << 4;
      }
      s0 += lo * q8[64 * k + l];
      s1 += hi * q8[64 * k + 32 + l];
    }
    isum += sc[2 * k] * s0 + sc[2 * k + 1] * s1;
  }
  return isum;
}

}  // namespace

float dot_q4_K_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ4_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int sc[8], mn[8];
    k4_scales(w[b].scales, sc, mn);
    const int isum = q45_isum(w[b].qs, nullptr, sc, a[b].qs);
    acc.add(b, contrib_k_min(isum, k4_min_sum(a[b], mn), w[b].d, w[b].dmin, a[b].d));
  }
  return acc.reduce();
}

float dot_q5_K_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ5_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int sc[8], mn[8];
    k4_scales(w[b].scales, sc, mn);
    const int isum = q45_isum(w[b].qs, w[b].qh, sc, a[b].qs);
    acc.add(b, contrib_k_min(isum, k4_min_sum(a[b], mn), w[b].d, w[b].dmin, a[b].d));
  }
  return acc.reduce();
}

float dot_q6_K_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ6_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const std::int8_t* q8 = a[b].qs;
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const std::uint8_t* ql = w[b].ql + 64 * h;
      const std::uint8_t* qh = w[b].qh + 32 * h;
      const std::int8_t* y = q8 + 128 * h;
      for (int half = 0; half < 2; ++half) {
        // Written as code * y - 32 * y with one accumulator per group: GCC 12.2 at -O3 with
        // AVX-512 (-march=native here, or sapphirerapids) miscompiles the s[4] array form.
        int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int i = 0; i < 16; ++i) {
          const int l = 16 * half + i;
          const int lo0 = ql[l], lo1 = ql[l + 32], hb = qh[l];
          s0 += ((lo0 & 0xF) | ((hb & 0x03) << 4)) * y[l] - 32 * y[l];
          s1 += ((lo1 & 0xF) | ((hb & 0x0C) << 2)) * y[l + 32] - 32 * y[l + 32];
          s2 += ((lo0 >> 4) | (hb & 0x30)) * y[l + 64] - 32 * y[l + 64];
          s3 += ((lo1 >> 4) | ((hb & 0xC0) >> 2)) * y[l + 96] - 32 * y[l + 96];
        }
        isum += w[b].scales[8 * h + half] * s0 + w[b].scales[8 * h + 2 + half] * s1 +
                w[b].scales[8 * h + 4 + half] * s2 + w[b].scales[8 * h + 6 + half] * s3;
      }
    }
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

float dot_iq4_xs_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockIQ4_XS*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((w[b].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((w[b].scales_h >> 2 * ib) & 3) << 4);
      int sub = 0;
      for (int j = 0; j < 16; ++j) {
        sub += kIq4nlValues[w[b].qs[16 * ib + j] & 0xF] * a[b].qs[32 * ib + j];
        sub += kIq4nlValues[w[b].qs[16 * ib + j] >> 4] * a[b].qs[32 * ib + 16 + j];
      }
      isum += (ls - 32) * sub;
    }
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

float dot_tq1_0_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockTQ1_0*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  std::int8_t t[kQK_K];
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    tq1_unpack(w[b], t);
    int isum = 0;
    for (int e = 0; e < kQK_K; ++e) isum += t[e] * a[b].qs[e];
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

float dot_tq2_0_scalar(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockTQ2_0*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
    // Constant shifts: GCC 12.2 at -O3 with AVX-512 miscompiles this loop nest when
    // the shift is the loop variable 2*l.
    for (int g = 0; g < 2; ++g) {
      const std::int8_t* y = a[b].qs + 128 * g;
      for (int m = 0; m < 32; ++m) {
        const int q = w[b].qs[32 * g + m];
        isum += ((q & 3) - 1) * y[m] + (((q >> 2) & 3) - 1) * y[32 + m] + (((q >> 4) & 3) - 1) * y[64 + m] +
                ((q >> 6) - 1) * y[96 + m];
      }
    }
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

}  // namespace fucina::quant::detail
