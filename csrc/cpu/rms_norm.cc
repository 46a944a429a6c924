// compstack::rms_norm on the CPU.
//
//   y = x / sqrt(mean(x^2 over the last axis) + epsilon) * weight
//
// Inputs: x [..., D] and weight [D], both float32 or both float16. Output: y like x.
// Float attribute 0: epsilon (>= 0). Sums are accumulated in double.
#include "compstack/elem.h"
#include "compstack/kernel.h"
#include "compstack/math.h"

namespace {

template <typename T>
void rms_norm_rows(const T* x, const T* w, T* y, int64_t rows, int64_t d, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      double v = cs::load(xr, i);
      ss += v * v;
    }
    double inv = 1.0 / cs_sqrt(ss / (double)d + eps);
    for (int64_t i = 0; i < d; ++i) cs::store(yr, i, cs::load(xr, i) * inv * cs::load(w, i));
  }
}

}  // namespace

CS_API int32_t cs_rms_norm(CS_KERNEL_ARGS) {
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
  switch (x->dtype) {
    case CS_FLOAT32:
      rms_norm_rows((const float*)x->data, (const float*)w->data, (float*)y->data, rows, d, fattrs[0]);
      return CS_OK;
    case CS_FLOAT16:
      rms_norm_rows((const cs::half_t*)x->data, (const cs::half_t*)w->data, (cs::half_t*)y->data, rows, d,
                    fattrs[0]);
      return CS_OK;
    default:
      return CS_BAD_DTYPE;
  }
}

CS_EXPORT_KERNEL(cs_rms_norm, 2, 1)
