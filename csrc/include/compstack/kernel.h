/* compstack custom-op kernel ABI: one plain C entry point per kernel.
 *
 * Every CPU kernel is
 *
 *   int32_t NAME(const cs_tensor* inputs, int32_t n_inputs,
 *                cs_tensor* outputs, int32_t n_outputs,
 *                const int64_t* iattrs, int32_t n_iattrs,
 *                const double* fattrs, int32_t n_fattrs);
 *
 * and every CUDA kernel takes one more trailing argument, the cudaStream_t (as void*).
 *
 * - Tensors are dense and row-major (C-contiguous); outputs are allocated by the caller
 *   with the shapes and dtypes the op's shape rule gives.
 * - dtype codes are ONNX TensorProto.DataType numbers (CS_FLOAT32 = 1, ...).
 * - Attributes: the op's int/bool attributes in declaration order in iattrs, its float
 *   attributes in declaration order in fattrs.
 * - The return value is CS_OK or one of the CS_BAD_* codes; a kernel never aborts.
 *
 * The kernel sources must stay freestanding (no libc, libm, allocation, globals or
 * threads): the same source is linked into IREE's embedded-ELF dispatches. Use the
 * helpers of compstack/math.h for exp/erf/sqrt and float16.
 *
 * After the kernel, CS_EXPORT_KERNEL(NAME, N_IN, N_OUT) generates the per-stack
 * adapters of the build flavour being compiled (IREE, XLA FFI; none in the plain
 * shared library).
 */
#ifndef COMPSTACK_KERNEL_H_
#define COMPSTACK_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define CS_EXTERN_C extern "C"
#else
#define CS_EXTERN_C
#endif

#if defined(CS_BUILD_IREE)
#define CS_API CS_EXTERN_C /* statically linked into the dispatch: no export */
#elif defined(_WIN32)
#define CS_API CS_EXTERN_C __declspec(dllexport)
#else
#define CS_API CS_EXTERN_C __attribute__((visibility("default")))
#endif

#define CS_MAX_RANK 8
#define CS_MAX_TENSORS 16

/* ONNX TensorProto.DataType codes. */
enum {
  CS_FLOAT32 = 1,
  CS_UINT8 = 2,
  CS_INT8 = 3,
  CS_INT32 = 6,
  CS_INT64 = 7,
  CS_BOOL = 9,
  CS_FLOAT16 = 10,
  CS_FLOAT64 = 11
};

/* Return codes. */
enum {
  CS_OK = 0,
  CS_BAD_ARITY = 1, /* wrong number of inputs, outputs or attributes */
  CS_BAD_DTYPE = 2, /* a dtype the kernel does not implement */
  CS_BAD_SHAPE = 3, /* shapes that do not fit the op */
  CS_BAD_ATTR = 4,  /* an attribute value out of range */
  CS_DEVICE_ERROR = 5 /* the device runtime failed (CUDA) */
};

typedef struct cs_tensor {
  void* data;
  int64_t shape[CS_MAX_RANK];
  int32_t ndim;
  int32_t dtype;
} cs_tensor;

#define CS_KERNEL_ARGS                                                      \
  const cs_tensor *inputs, int32_t n_inputs, cs_tensor *outputs,            \
      int32_t n_outputs, const int64_t *iattrs, int32_t n_iattrs,           \
      const double *fattrs, int32_t n_fattrs

typedef int32_t (*cs_kernel_fn)(CS_KERNEL_ARGS);
typedef int32_t (*cs_cuda_kernel_fn)(CS_KERNEL_ARGS, void* stream);

/* Number of elements of a tensor. */
static inline int64_t cs_numel(const cs_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

#if defined(CS_BUILD_IREE)
#include "compstack/iree_adapter.h"
#define CS_EXPORT_KERNEL(name, n_in, n_out) CS_IREE_ADAPTER(name, n_in, n_out)
#elif defined(CS_BUILD_XLA)
#include "compstack/xla_adapter.h"
#define CS_EXPORT_KERNEL(name, n_in, n_out) CS_XLA_ADAPTER(name, n_in, n_out)
#else
#define CS_EXPORT_KERNEL(name, n_in, n_out)
#endif

#endif /* COMPSTACK_KERNEL_H_ */
