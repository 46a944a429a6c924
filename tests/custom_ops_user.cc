// A user op for tests/test_custom_ops.py: mylib::gather_rows (an embedding lookup with an
// integer input), compiled into the kernel library through custom_op(sources=[...]).
#include "compstack/kernel.h"

CS_API int32_t mylib_gather_rows(CS_KERNEL_ARGS) {
  (void)iattrs;
  (void)fattrs;
  if (n_inputs != 2 || n_outputs != 1 || n_iattrs != 0 || n_fattrs != 0) return CS_BAD_ARITY;
  const cs_tensor* table = &inputs[0];
  const cs_tensor* ids = &inputs[1];
  if (ids->dtype != CS_INT64 || outputs[0].dtype != table->dtype) return CS_BAD_DTYPE;
  if (table->ndim != 2 || ids->ndim != 1) return CS_BAD_SHAPE;
  int64_t size = table->dtype == CS_FLOAT32 ? 4 : table->dtype == CS_FLOAT16 ? 2 : 0;
  if (size == 0) return CS_BAD_DTYPE;
  int64_t rows = table->shape[0], row_bytes = table->shape[1] * size;
  const unsigned char* src = (const unsigned char*)table->data;
  unsigned char* dst = (unsigned char*)outputs[0].data;
  const int64_t* idx = (const int64_t*)ids->data;
  for (int64_t i = 0; i < ids->shape[0]; ++i) {
    int64_t r = idx[i] < 0 ? idx[i] + rows : idx[i];
    if (r < 0 || r >= rows) return CS_BAD_SHAPE;
    for (int64_t b = 0; b < row_bytes; ++b) dst[i * row_bytes + b] = src[r * row_bytes + b];
  }
  return CS_OK;
}

CS_EXPORT_KERNEL(mylib_gather_rows, 2, 1)
