// compstack::rms_norm on NVIDIA GPUs: one block per row, a shared-memory reduction of
// the sum of squares (double), then the scaled row. Same semantics and ABI as the CPU
// kernel (csrc/cpu/rms_norm.cc), plus the trailing cudaStream_t; tensor data pointers
// are device pointers.
#include <cuda_runtime.h>

#include "compstack/elem.h"
#include "compstack/kernel.h"
#include "compstack/math.h"

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* w, T* y, int64_t d, double eps) {
  __shared__ double partial[kThreads];
  const T* xr = x + blockIdx.x * d;
  T* yr = y + blockIdx.x * d;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    double v = cs::load(xr, i);
    ss += v * v;
  }
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  double inv = 1.0 / cs_sqrt(partial[0] / (double)d + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) cs::store(yr, i, cs::load(xr, i) * inv * cs::load(w, i));
}

}  // namespace

CS_API int32_t cs_rms_norm_cuda(CS_KERNEL_ARGS, void* stream) {
  (void)iattrs;
  if (n_inputs != 2 || n_outputs != 1 || n_iattrs != 0 || n_fattrs != 1) return CS_BAD_ARITY;
  const cs_tensor* x = &inputs[0];
  const cs_tensor* w = &inputs[1];
  cs_tensor* y = &outputs[0];
  if (w->dtype != x->dtype || y->dtype != x->dtype) return CS_BAD_DTYPE;
  if (x->ndim < 1 || w->ndim != 1 || w->shape[0] != x->shape[x->ndim - 1]) return CS_BAD_SHAPE;
  if (!(fattrs[0] >= 0.0)) return CS_BAD_ATTR;
  int64_t d = w->shape[0];
  int64_t rows = d > 0 ? cs_numel(x) / d : 0;
  if (rows == 0) return CS_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (x->dtype) {
    case CS_FLOAT32:
      rms_norm_kernel<<<rows, kThreads, 0, s>>>((const float*)x->data, (const float*)w->data, (float*)y->data, d,
                                                fattrs[0]);
      break;
    case CS_FLOAT16:
      rms_norm_kernel<<<rows, kThreads, 0, s>>>((const cs::half_t*)x->data, (const cs::half_t*)w->data,
                                                (cs::half_t*)y->data, d, fattrs[0]);
      break;
    default:
      return CS_BAD_DTYPE;
  }
  return cudaGetLastError() == cudaSuccess ? CS_OK : CS_DEVICE_ERROR;
}
