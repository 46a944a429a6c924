/* XLA adapter: an XLA FFI handler (jax.ffi) around a compstack CPU kernel.
 *
 * For CS_EXPORT_KERNEL(NAME, N_IN, N_OUT) it defines the handler symbol
 * `cs_xla__NAME`, which compstack registers with
 * `jax.ffi.register_ffi_target("cs_xla__NAME", jax.ffi.pycapsule(lib.cs_xla__NAME),
 * platform="cpu")` and calls with `jax.ffi.ffi_call`, passing the buffers and two
 * array attributes: `iattrs` (int64) and `fattrs` (float64), padded with one trailing
 * element so they are never empty. Built only with jaxlib's headers
 * (`jax.ffi.include_dir()`).
 */
#ifndef COMPSTACK_XLA_ADAPTER_H_
#define COMPSTACK_XLA_ADAPTER_H_

#include <string>

#include "compstack/kernel.h"
#include "xla/ffi/api/ffi.h"

namespace cs_xla {
namespace ffi = xla::ffi;

inline int32_t dtype_code(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return CS_FLOAT32;
    case ffi::DataType::F16: return CS_FLOAT16;
    case ffi::DataType::F64: return CS_FLOAT64;
    case ffi::DataType::S32: return CS_INT32;
    case ffi::DataType::S64: return CS_INT64;
    case ffi::DataType::S8: return CS_INT8;
    case ffi::DataType::U8: return CS_UINT8;
    case ffi::DataType::PRED: return CS_BOOL;
    default: return -1;
  }
}

inline bool fill(cs_tensor* t, const ffi::AnyBuffer& b) {
  auto dims = b.dimensions();
  if (dims.size() > CS_MAX_RANK) return false;
  t->data = b.untyped_data();
  t->ndim = (int32_t)dims.size();
  for (size_t i = 0; i < dims.size(); ++i) t->shape[i] = dims[i];
  t->dtype = dtype_code(b.element_type());
  return true;
}

inline ffi::Error call(cs_kernel_fn fn, const char* name, size_t n_in, size_t n_out, ffi::RemainingArgs args,
                       ffi::RemainingRets rets, ffi::Span<const int64_t> iattrs, ffi::Span<const double> fattrs) {
  cs_tensor t[CS_MAX_TENSORS];
  if (args.size() != n_in || rets.size() != n_out)
    return ffi::Error::InvalidArgument(std::string(name) + ": wrong number of operands or results");
  for (size_t i = 0; i < n_in; ++i) {
    auto b = args.get<ffi::AnyBuffer>(i);
    if (!b.has_value()) return b.error();
    if (!fill(&t[i], *b)) return ffi::Error::InvalidArgument(std::string(name) + ": rank > 8");
  }
  for (size_t j = 0; j < n_out; ++j) {
    auto r = rets.get<ffi::AnyBuffer>(j);
    if (!r.has_value()) return r.error();
    if (!fill(&t[n_in + j], **r)) return ffi::Error::InvalidArgument(std::string(name) + ": rank > 8");
  }
  /* The attribute arrays carry one padding element (never empty). */
  int32_t status = fn(t, (int32_t)n_in, t + n_in, (int32_t)n_out, iattrs.begin(), (int32_t)iattrs.size() - 1,
                      fattrs.begin(), (int32_t)fattrs.size() - 1);
  if (status != CS_OK)
    return ffi::Error::InvalidArgument(std::string(name) + ": kernel returned status " + std::to_string(status));
  return ffi::Error::Success();
}

}  // namespace cs_xla

#define CS_XLA_ADAPTER(name, n_in, n_out)                                                              \
  static xla::ffi::Error name##_xla_impl(xla::ffi::RemainingArgs a, xla::ffi::RemainingRets r,         \
                                         xla::ffi::Span<const int64_t> ia, xla::ffi::Span<const double> fa) { \
    return cs_xla::call(name, #name, n_in, n_out, a, r, ia, fa);                                       \
  }                                                                                                    \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(cs_xla__##name, name##_xla_impl,                                       \
                                xla::ffi::Ffi::Bind()                                                  \
                                    .RemainingArgs()                                                   \
                                    .RemainingRets()                                                   \
                                    .Attr<xla::ffi::Span<const int64_t>>("iattrs")                     \
                                    .Attr<xla::ffi::Span<const double>>("fattrs"));

#endif /* COMPSTACK_XLA_ADAPTER_H_ */
