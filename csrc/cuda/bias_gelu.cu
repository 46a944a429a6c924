// compstack::bias_gelu on NVIDIA GPUs: one thread per element (grid-stride loop).
// Same semantics and ABI as csrc/cpu/bias_gelu.cc plus the trailing cudaStream_t.
#include <cuda_runtime.h>

#include "compstack/elem.h"
#include "compstack/kernel.h"
#include "compstack/math.h"

namespace {

template <typename T>
__global__ void bias_gelu_kernel(const T* x, const T* b, T* y, T* pre, int64_t total, int64_t n,
                                 int64_t approximate) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
    double h = (double)(float)(cs::load(x, k) + cs::load(b, k % n));
    cs::store(pre, k, h);
    cs::store(y, k, cs_gelu(h, approximate));
  }
}

}  // namespace

CS_API int32_t cs_bias_gelu_cuda(CS_KERNEL_ARGS, void* stream) {
  (void)fattrs;
  if (n_inputs != 2 || n_outputs != 2 || n_iattrs != 1 || n_fattrs != 0) return CS_BAD_ARITY;
  const cs_tensor* x = &inputs[0];
  const cs_tensor* b = &inputs[1];
  if (b->dtype != x->dtype || outputs[0].dtype != x->dtype || outputs[1].dtype != x->dtype) return CS_BAD_DTYPE;
  if (x->ndim < 1 || b->ndim != 1 || b->shape[0] != x->shape[x->ndim - 1]) return CS_BAD_SHAPE;
  if (iattrs[0] != 0 && iattrs[0] != 1) return CS_BAD_ATTR;
  int64_t n = b->shape[0], total = cs_numel(x);
  if (total == 0) return CS_OK;
  int blocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (x->dtype) {
    case CS_FLOAT32:
      bias_gelu_kernel<<<blocks, 256, 0, s>>>((const float*)x->data, (const float*)b->data, (float*)outputs[0].data,
                                              (float*)outputs[1].data, total, n, iattrs[0]);
      break;
    case CS_FLOAT16:
      bias_gelu_kernel<<<blocks, 256, 0, s>>>((const cs::half_t*)x->data, (const cs::half_t*)b->data,
                                              (cs::half_t*)outputs[0].data, (cs::half_t*)outputs[1].data, total, n,
                                              iattrs[0]);
      break;
    default:
      return CS_BAD_DTYPE;
  }
  return cudaGetLastError() == cudaSuccess ? CS_OK : CS_DEVICE_ERROR;
}
