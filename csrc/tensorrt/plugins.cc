// TensorRT plugins (IPluginV3, TensorRT 10) around compstack's CUDA kernels.
//
// One generic plugin class, instantiated per op from a descriptor (name, arity,
// attributes, the CUDA entry point of csrc/cuda/*.cu). TensorRT's ONNX parser finds a
// plugin by the node's op type ("rms_norm", "bias_gelu"), version "1", empty namespace,
// and hands the node's attributes as PluginFields (float -> kFLOAT32, int -> kINT32).
//
// Built by CMakeLists.txt only where NvInfer.h and libnvinfer are found (with the CUDA
// kernels). Load it before parsing: ctypes.CDLL(path, RTLD_GLOBAL) (static registration
// through REGISTER_TENSORRT_PLUGIN) or IPluginRegistry::loadLibrary (getCreators below).
//
// Both ops' outputs have the shape and dtype of input 0; inputs and outputs are linear
// (row-major) float32 or float16, all of one type.
#include <NvInfer.h>
#include <NvInferRuntime.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "compstack/kernel.h"

CS_EXTERN_C int32_t cs_rms_norm_cuda(CS_KERNEL_ARGS, void* stream);
CS_EXTERN_C int32_t cs_bias_gelu_cuda(CS_KERNEL_ARGS, void* stream);

namespace cs_trt {

using namespace nvinfer1;

struct AttrDesc {
  const char* name;
  bool is_float;  // else int
  double fallback;
};

struct OpDesc {
  const char* name;
  int32_t n_in;
  int32_t n_out;
  std::vector<AttrDesc> attrs;
  cs_cuda_kernel_fn fn;
};

const OpDesc& rms_norm_desc() {
  static const OpDesc d{"rms_norm", 2, 1, {{"epsilon", true, 1e-6}}, cs_rms_norm_cuda};
  return d;
}

const OpDesc& bias_gelu_desc() {
  static const OpDesc d{"bias_gelu", 2, 2, {{"approximate", false, 0.0}}, cs_bias_gelu_cuda};
  return d;
}

int32_t dtype_code(DataType t) {
  return t == DataType::kFLOAT ? CS_FLOAT32 : t == DataType::kHALF ? CS_FLOAT16 : -1;
}

class Plugin : public IPluginV3, public IPluginV3OneCore, public IPluginV3OneBuild, public IPluginV3OneRuntime {
 public:
  Plugin(const OpDesc& desc, std::vector<double> values) : desc_(desc), values_(std::move(values)) {
    float_store_.resize(values_.size());
    int_store_.resize(values_.size());
  }

  // IPluginV3
  IPluginCapability* getCapabilityInterface(PluginCapabilityType type) noexcept override {
    if (type == PluginCapabilityType::kBUILD) return static_cast<IPluginV3OneBuild*>(this);
    if (type == PluginCapabilityType::kRUNTIME) return static_cast<IPluginV3OneRuntime*>(this);
    return static_cast<IPluginV3OneCore*>(this);
  }
  IPluginV3* clone() noexcept override { return new Plugin(desc_, values_); }

  // IPluginV3OneCore
  AsciiChar const* getPluginName() const noexcept override { return desc_.name; }
  AsciiChar const* getPluginVersion() const noexcept override { return "1"; }
  AsciiChar const* getPluginNamespace() const noexcept override { return ""; }

  // IPluginV3OneBuild
  int32_t getNbOutputs() const noexcept override { return desc_.n_out; }
  int32_t configurePlugin(DynamicPluginTensorDesc const*, int32_t, DynamicPluginTensorDesc const*,
                          int32_t) noexcept override {
    return 0;
  }
  int32_t getOutputDataTypes(DataType* out, int32_t n_out, DataType const* in, int32_t) const noexcept override {
    for (int32_t i = 0; i < n_out; ++i) out[i] = in[0];
    return 0;
  }
  int32_t getOutputShapes(DimsExprs const* in, int32_t, DimsExprs const*, int32_t, DimsExprs* out, int32_t n_out,
                          IExprBuilder&) noexcept override {
    for (int32_t i = 0; i < n_out; ++i) out[i] = in[0];
    return 0;
  }
  bool supportsFormatCombination(int32_t pos, DynamicPluginTensorDesc const* io, int32_t, int32_t) noexcept override {
    const PluginTensorDesc& d = io[pos].desc;
    if (d.format != TensorFormat::kLINEAR) return false;
    if (pos == 0) return d.type == DataType::kFLOAT || d.type == DataType::kHALF;
    return d.type == io[0].desc.type;
  }
  size_t getWorkspaceSize(DynamicPluginTensorDesc const*, int32_t, DynamicPluginTensorDesc const*,
                          int32_t) const noexcept override {
    return 0;
  }

  // IPluginV3OneRuntime
  int32_t onShapeChange(PluginTensorDesc const*, int32_t, PluginTensorDesc const*, int32_t) noexcept override {
    return 0;
  }
  IPluginV3* attachToContext(IPluginResourceContext*) noexcept override { return clone(); }
  int32_t enqueue(PluginTensorDesc const* in_desc, PluginTensorDesc const* out_desc, void const* const* inputs,
                  void* const* outputs, void*, cudaStream_t stream) noexcept override {
    cs_tensor t[CS_MAX_TENSORS];
    for (int32_t i = 0; i < desc_.n_in + desc_.n_out; ++i) {
      const PluginTensorDesc& d = i < desc_.n_in ? in_desc[i] : out_desc[i - desc_.n_in];
      t[i].data = i < desc_.n_in ? const_cast<void*>(inputs[i]) : outputs[i - desc_.n_in];
      t[i].ndim = d.dims.nbDims;
      for (int32_t k = 0; k < d.dims.nbDims && k < CS_MAX_RANK; ++k) t[i].shape[k] = d.dims.d[k];
      t[i].dtype = dtype_code(d.type);
    }
    std::vector<int64_t> ints;
    std::vector<double> floats;
    for (size_t a = 0; a < desc_.attrs.size(); ++a) {
      if (desc_.attrs[a].is_float) {
        floats.push_back(values_[a]);
      } else {
        ints.push_back(static_cast<int64_t>(values_[a]));
      }
    }
    ints.push_back(0);  // never empty
    floats.push_back(0.0);
    return desc_.fn(t, desc_.n_in, t + desc_.n_in, desc_.n_out, ints.data(), (int32_t)ints.size() - 1,
                    floats.data(), (int32_t)floats.size() - 1, stream);
  }
  PluginFieldCollection const* getFieldsToSerialize() noexcept override {
    fields_.clear();
    for (size_t a = 0; a < desc_.attrs.size(); ++a) {
      if (desc_.attrs[a].is_float) {
        float_store_[a] = static_cast<float>(values_[a]);
        fields_.emplace_back(desc_.attrs[a].name, &float_store_[a], PluginFieldType::kFLOAT32, 1);
      } else {
        int_store_[a] = static_cast<int32_t>(values_[a]);
        fields_.emplace_back(desc_.attrs[a].name, &int_store_[a], PluginFieldType::kINT32, 1);
      }
    }
    collection_.nbFields = static_cast<int32_t>(fields_.size());
    collection_.fields = fields_.data();
    return &collection_;
  }

 private:
  const OpDesc& desc_;
  std::vector<double> values_;
  std::vector<float> float_store_;
  std::vector<int32_t> int_store_;
  std::vector<PluginField> fields_;
  PluginFieldCollection collection_{};
};

double field_value(const PluginField& f) {
  switch (f.type) {
    case PluginFieldType::kFLOAT32: return *static_cast<const float*>(f.data);
    case PluginFieldType::kFLOAT64: return *static_cast<const double*>(f.data);
    case PluginFieldType::kINT32: return *static_cast<const int32_t*>(f.data);
    case PluginFieldType::kINT64: return static_cast<double>(*static_cast<const int64_t*>(f.data));
    case PluginFieldType::kINT8: return *static_cast<const int8_t*>(f.data);
    default: return 0.0;
  }
}

class Creator : public IPluginCreatorV3One {
 public:
  explicit Creator(const OpDesc& desc) : desc_(desc) {
    for (const AttrDesc& a : desc_.attrs)
      fields_.emplace_back(a.name, nullptr, a.is_float ? PluginFieldType::kFLOAT32 : PluginFieldType::kINT32, 1);
    collection_.nbFields = static_cast<int32_t>(fields_.size());
    collection_.fields = fields_.data();
  }
  IPluginV3* createPlugin(AsciiChar const*, PluginFieldCollection const* fc, TensorRTPhase) noexcept override {
    std::vector<double> values;
    for (const AttrDesc& a : desc_.attrs) {
      double v = a.fallback;
      for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
        if (std::strcmp(fc->fields[i].name, a.name) == 0 && fc->fields[i].data != nullptr)
          v = field_value(fc->fields[i]);
      values.push_back(v);
    }
    return new Plugin(desc_, values);
  }
  PluginFieldCollection const* getFieldNames() noexcept override { return &collection_; }
  AsciiChar const* getPluginName() const noexcept override { return desc_.name; }
  AsciiChar const* getPluginVersion() const noexcept override { return "1"; }
  AsciiChar const* getPluginNamespace() const noexcept override { return ""; }

 private:
  const OpDesc& desc_;
  std::vector<PluginField> fields_;
  PluginFieldCollection collection_{};
};

class RmsNormCreator : public Creator {
 public:
  RmsNormCreator() : Creator(rms_norm_desc()) {}
};

class BiasGeluCreator : public Creator {
 public:
  BiasGeluCreator() : Creator(bias_gelu_desc()) {}
};

REGISTER_TENSORRT_PLUGIN(RmsNormCreator);
REGISTER_TENSORRT_PLUGIN(BiasGeluCreator);

}  // namespace cs_trt

// For IPluginRegistry::loadLibrary.
extern "C" void setLoggerFinder(nvinfer1::ILoggerFinder*) {}

extern "C" nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) {
  static cs_trt::RmsNormCreator rms;
  static cs_trt::BiasGeluCreator gelu;
  static nvinfer1::IPluginCreatorInterface* const creators[] = {&rms, &gelu};
  nbCreators = 2;
  return creators;
}
