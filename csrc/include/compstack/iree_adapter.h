/* IREE adapter: a function an llvm-cpu dispatch calls (embedded ELF, bare pointers).
 *
 * For CS_EXPORT_KERNEL(NAME, N_IN, N_OUT) it defines
 *
 *   void cs_iree__NAME(const int64_t* meta, void* in0, ..., void* out0, ...);
 *
 * which compstack's IREE lowering declares with `hal.import.static` and
 * `llvm.bareptr = true` and calls from a one-workgroup `stream.executable` (the approach
 * of IREE's samples/custom_dispatch/cpu/embedded). `meta` is an int64 constant the
 * compiler embeds:
 *
 *   [n_in, n_out, n_iattrs, n_fattrs,
 *    for each tensor (inputs, then outputs): dtype, ndim, dim0, dim1, ...,
 *    iattrs..., fattrs as IEEE-754 bit patterns...]
 *
 * Freestanding: nothing here may call libc (no memcpy: plain loops only).
 */
#ifndef COMPSTACK_IREE_ADAPTER_H_
#define COMPSTACK_IREE_ADAPTER_H_

#include "compstack/kernel.h"

static inline int32_t cs_iree_call(cs_kernel_fn fn, const int64_t* meta, void* const* ptrs) {
  cs_tensor t[CS_MAX_TENSORS];
  double f[CS_MAX_TENSORS];
  int64_t n_in = meta[0], n_out = meta[1], n_i = meta[2], n_f = meta[3];
  if (n_in + n_out > CS_MAX_TENSORS || n_f > CS_MAX_TENSORS) return CS_BAD_ARITY;
  const int64_t* p = meta + 4;
  for (int64_t k = 0; k < n_in + n_out; ++k) {
    t[k].data = ptrs[k];
    t[k].dtype = (int32_t)p[0];
    t[k].ndim = (int32_t)p[1];
    for (int32_t d = 0; d < t[k].ndim && d < CS_MAX_RANK; ++d) t[k].shape[d] = p[2 + d];
    p += 2 + p[1];
  }
  const int64_t* iattrs = p;
  p += n_i;
  for (int64_t j = 0; j < n_f; ++j) {
    union {
      int64_t i;
      double f;
    } b;
    b.i = p[j];
    f[j] = b.f;
  }
  return fn(t, (int32_t)n_in, t + n_in, (int32_t)n_out, iattrs, (int32_t)n_i, f, (int32_t)n_f);
}

#define CS_IREE_IN_1 void *i0
#define CS_IREE_IN_2 CS_IREE_IN_1, void *i1
#define CS_IREE_IN_3 CS_IREE_IN_2, void *i2
#define CS_IREE_IN_4 CS_IREE_IN_3, void *i3
#define CS_IREE_IN_5 CS_IREE_IN_4, void *i4
#define CS_IREE_IN_6 CS_IREE_IN_5, void *i5
#define CS_IREE_IN_7 CS_IREE_IN_6, void *i6
#define CS_IREE_IN_8 CS_IREE_IN_7, void *i7
#define CS_IREE_INL_1 i0
#define CS_IREE_INL_2 CS_IREE_INL_1, i1
#define CS_IREE_INL_3 CS_IREE_INL_2, i2
#define CS_IREE_INL_4 CS_IREE_INL_3, i3
#define CS_IREE_INL_5 CS_IREE_INL_4, i4
#define CS_IREE_INL_6 CS_IREE_INL_5, i5
#define CS_IREE_INL_7 CS_IREE_INL_6, i6
#define CS_IREE_INL_8 CS_IREE_INL_7, i7
#define CS_IREE_OUT_1 void *o0
#define CS_IREE_OUT_2 CS_IREE_OUT_1, void *o1
#define CS_IREE_OUT_3 CS_IREE_OUT_2, void *o2
#define CS_IREE_OUT_4 CS_IREE_OUT_3, void *o3
#define CS_IREE_OUTL_1 o0
#define CS_IREE_OUTL_2 CS_IREE_OUTL_1, o1
#define CS_IREE_OUTL_3 CS_IREE_OUTL_2, o2
#define CS_IREE_OUTL_4 CS_IREE_OUTL_3, o3

/* N_IN in 1..8 and N_OUT in 1..4, as literal numbers. */
#define CS_IREE_ADAPTER(name, n_in, n_out)                                                   \
  CS_API void cs_iree__##name(const int64_t* meta, CS_IREE_IN_##n_in, CS_IREE_OUT_##n_out) { \
    void* ptrs[] = {CS_IREE_INL_##n_in, CS_IREE_OUTL_##n_out};                               \
    (void)cs_iree_call(name, meta, ptrs);                                                    \
  }

#endif /* COMPSTACK_IREE_ADAPTER_H_ */
