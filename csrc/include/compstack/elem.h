/* Element load/store as double for the dtypes compstack kernels implement:
 * float32 (float) and float16 (IEEE binary16 bits in a uint16_t). */
#ifndef COMPSTACK_ELEM_H_
#define COMPSTACK_ELEM_H_

#include <stdint.h>

#include "compstack/math.h"

#ifdef __cplusplus
namespace cs {

#if defined(__CUDACC__)
#define CS_HDT __host__ __device__ inline
#else
#define CS_HDT inline
#endif

/* A float16 element: the binary16 bits, converted on load and store. */
struct half_t {
  uint16_t bits;
};

CS_HDT double load(const float* p, int64_t i) { return p[i]; }
CS_HDT double load(const half_t* p, int64_t i) { return cs_half_to_float(p[i].bits); }
CS_HDT void store(float* p, int64_t i, double v) { p[i] = (float)v; }
CS_HDT void store(half_t* p, int64_t i, double v) { p[i].bits = cs_float_to_half((float)v); }

}  // namespace cs
#endif

#endif /* COMPSTACK_ELEM_H_ */
