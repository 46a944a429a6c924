/* Freestanding math for compstack kernels: float16 <-> float32, exp, erf, GELU.
 *
 * No libm: the same code runs in the plain shared library, in IREE's embedded-ELF
 * dispatches (where libm does not exist) and, through CS_HD, in CUDA device code.
 * Accuracy: cs_exp and cs_erf are double precision to ~1e-15 and ~1e-8 (relative,
 * absolute) respectively; float16 conversion rounds to nearest even like IEEE-754.
 */
#ifndef COMPSTACK_MATH_H_
#define COMPSTACK_MATH_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define CS_HD __host__ __device__ inline
#else
#define CS_HD static inline
#endif

typedef union cs_bits32 { float f; uint32_t u; } cs_bits32;
typedef union cs_bits64 { double f; uint64_t u; int64_t i; } cs_bits64;

/* IEEE-754 binary16 bits -> float. */
CS_HD float cs_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  cs_bits32 out;
  if (exp == 0) {
    if (man == 0) {
      out.u = sign;
    } else { /* subnormal: normalise */
      exp = 113;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      out.u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out.u = sign | 0x7f800000u | (man << 13);
  } else {
    out.u = sign | ((exp + 112) << 23) | (man << 13);
  }
  return out.f;
}

/* float -> IEEE-754 binary16 bits, round to nearest even. */
CS_HD uint16_t cs_float_to_half(float f) {
  cs_bits32 in;
  in.f = f;
  uint32_t sign = (in.u >> 16) & 0x8000u;
  uint32_t a = in.u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
  if (a < 0x38800000u) {                                   /* half subnormal or zero */
    if (a < 0x33000000u) return (uint16_t)sign;
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = a - 0x38000000u;
  uint32_t res = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return (uint16_t)(sign | res);
}

CS_HD double cs_sqrt(double x) {
#if defined(__CUDA_ARCH__)
  return sqrt(x);
#else
  return __builtin_sqrt(x);
#endif
}

/* e^x in double precision (|rel err| ~ 1e-15); clamps to [-700, 700]. */
CS_HD double cs_exp(double x) {
  if (x != x) return x;
  if (x > 700.0) x = 700.0;
  if (x < -700.0) x = -700.0;
  const double log2e = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01,
               ln2_lo = 1.90821492927058770002e-10;
  double kf = x * log2e;
  int64_t k = (int64_t)(kf >= 0 ? kf + 0.5 : kf - 0.5);
  double r = (x - (double)k * ln2_hi) - (double)k * ln2_lo; /* |r| <= 0.35 */
  /* Taylor polynomial of e^r to degree 13 (Horner; no tables, nothing for memcpy). */
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  cs_bits64 scale;
  scale.u = (uint64_t)(k + 1023) << 52;
  return p * scale.f;
}

/* erf(x) in double: Taylor series for |x| < 1 (abs err < 1e-15), Numerical Recipes'
 * Chebyshev erfc otherwise (rel err of erfc < 1.2e-7, so |err| of erf < 2e-8). */
CS_HD double cs_erf(double x) {
  double z = x < 0 ? -x : x;
  if (z < 1.0) {
    double x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 24; ++n) {
      term *= -x2 / n;
      sum += term / (2 * n + 1);
    }
    return sum * 1.1283791670955126; /* 2/sqrt(pi) */
  }
  double t = 1.0 / (1.0 + 0.5 * z);
  double poly =
      -z * z - 1.26551223 +
      t * (1.00002368 +
           t * (0.37409196 +
                t * (0.09678418 +
                     t * (-0.18628806 +
                          t * (0.27886807 +
                               t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  double erfc = t * cs_exp(poly);
  return x >= 0 ? 1.0 - erfc : erfc - 1.0;
}

CS_HD double cs_tanh(double x) {
  double z = x < 0 ? -x : x;
  double e = cs_exp(-2.0 * z);
  double t = (1.0 - e) / (1.0 + e);
  return x < 0 ? -t : t;
}

/* GELU: exact (erf) when approximate == 0, the tanh form otherwise. */
CS_HD double cs_gelu(double x, int64_t approximate) {
  if (approximate) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    return 0.5 * x * (1.0 + cs_tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + cs_erf(x * 0.7071067811865476));
}

#endif /* COMPSTACK_MATH_H_ */
