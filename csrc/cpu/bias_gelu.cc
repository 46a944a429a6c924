// compstack::bias_gelu on the CPU: the fused bias + GELU of a transformer MLP, which
// also returns the pre-activation (kept for the backward pass).
//
//   pre = x + bias          y = gelu(pre)
//
// Inputs: x [..., N] and bias [N], both float32 or both float16. Outputs: y and pre,
// both like x. Int attribute 0: approximate (0: exact erf GELU, 1: tanh form).
#include "compstack/elem.h"
#include "compstack/kernel.h"
#include "compstack/math.h"

namespace {

template <typename T>
void bias_gelu(const T* x, const T* b, T* y, T* pre, int64_t rows, int64_t n, int64_t approximate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = r * n + i;
      double h = (double)(float)(cs::load(x, k) + cs::load(b, i));  // the sum in float, like the frameworks
      cs::store(pre, k, h);
      cs::store(y, k, cs_gelu(h, approximate));
    }
  }
}

}  // namespace

CS_API int32_t cs_bias_gelu(CS_KERNEL_ARGS) {
  (void)fattrs;
  if (n_inputs != 2 || n_outputs != 2 || n_iattrs != 1 || n_fattrs != 0) return CS_BAD_ARITY;
  const cs_tensor* x = &inputs[0];
  const cs_tensor* b = &inputs[1];
  if (b->dtype != x->dtype || outputs[0].dtype != x->dtype || outputs[1].dtype != x->dtype) return CS_BAD_DTYPE;
  if (x->ndim < 1 || b->ndim != 1 || b->shape[0] != x->shape[x->ndim - 1]) return CS_BAD_SHAPE;
  if (iattrs[0] != 0 && iattrs[0] != 1) return CS_BAD_ATTR;
  int64_t n = b->shape[0];
  int64_t rows = n > 0 ? cs_numel(x) / n : 0;
  switch (x->dtype) {
    case CS_FLOAT32:
      bias_gelu((const float*)x->data, (const float*)b->data, (float*)outputs[0].data, (float*)outputs[1].data,
                rows, n, iattrs[0]);
      return CS_OK;
    case CS_FLOAT16:
      bias_gelu((const cs::half_t*)x->data, (const cs::half_t*)b->data, (cs::half_t*)outputs[0].data,
                (cs::half_t*)outputs[1].data, rows, n, iattrs[0]);
      return CS_OK;
    default:
      return CS_BAD_DTYPE;
  }
}

CS_EXPORT_KERNEL(cs_bias_gelu, 2, 2)
