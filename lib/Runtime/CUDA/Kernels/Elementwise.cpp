//===- Elementwise.cpp - The CUDA elementwise kernel (NVRTC) --------------===//
//
// Compiles each elementwise program's source (ElementwiseSource.cpp) with
// NVRTC when the kernel is created and loads it with the runtime's library
// API (context-independent: loaded into whichever device's context launches
// it). Compiled code is cached for the whole process by architecture and
// source, so executors on several threads (or devices of one architecture)
// compile each distinct program once. Cached libraries stay loaded until the
// process exits (unloading them from static destructors would race the CUDA
// runtime's own teardown).
//
//===----------------------------------------------------------------------===//

#include "Elementwise.h"
#include "Common.h"

#include <nvrtc.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

using namespace loom::runtime;
using namespace loom::runtime::cuda;

//===----------------------------------------------------------------------===//
// NVRTC
//===----------------------------------------------------------------------===//

Status cuda::nvrtcOptions(int computeCapability,
                          std::vector<std::string> &options, bool &cubin) {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0)
    return Status::error("NVRTC lists no supported architectures");
  std::vector<int> archs(static_cast<size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS)
    return Status::error("NVRTC lists no supported architectures");
  std::sort(archs.begin(), archs.end());
  options = {"-std=c++17", "-fmad=false"};
  if (std::find(archs.begin(), archs.end(), computeCapability) != archs.end()) {
    cubin = true;
    options.push_back("-arch=sm_" + std::to_string(computeCapability));
    return Status::ok();
  }
  // A device newer than this NVRTC: PTX for the newest architecture below
  // it, which the driver compiles for the device.
  int best = 0;
  for (int arch : archs)
    if (arch < computeCapability)
      best = arch;
  if (best == 0)
    return Status::error("NVRTC " + std::to_string(archs.front()) + "-" +
                         std::to_string(archs.back()) +
                         " cannot compile for compute capability " +
                         std::to_string(computeCapability));
  cubin = false;
  options.push_back("-arch=compute_" + std::to_string(best));
  return Status::ok();
}

Status cuda::compileElementwise(const std::string &source,
                                int computeCapability, std::string &image) {
  std::vector<std::string> options;
  bool cubin = false;
  if (Status s = nvrtcOptions(computeCapability, options, cubin); !s)
    return s;
  nvrtcProgram program;
  nvrtcResult result = nvrtcCreateProgram(
      &program, source.c_str(), "loom_elementwise.cu", 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS)
    return Status::error(std::string("nvrtcCreateProgram: ") +
                         nvrtcGetErrorString(result));
  std::vector<const char *> optionPointers;
  for (const std::string &option : options)
    optionPointers.push_back(option.c_str());
  result = nvrtcCompileProgram(program, int(optionPointers.size()),
                               optionPointers.data());
  if (result != NVRTC_SUCCESS) {
    size_t logSize = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(program, &logSize) == NVRTC_SUCCESS) {
      log.resize(logSize);
      nvrtcGetProgramLog(program, log.data());
    }
    nvrtcDestroyProgram(&program);
    return Status::error(std::string("NVRTC failed to compile an elementwise "
                                     "program (") +
                         nvrtcGetErrorString(result) + "):\n" + log);
  }
  size_t size = 0;
  result = cubin ? nvrtcGetCUBINSize(program, &size)
                 : nvrtcGetPTXSize(program, &size);
  if (result == NVRTC_SUCCESS) {
    image.assign(size, '\0');
    result = cubin ? nvrtcGetCUBIN(program, image.data())
                   : nvrtcGetPTX(program, image.data());
  }
  nvrtcDestroyProgram(&program);
  if (result != NVRTC_SUCCESS)
    return Status::error(std::string("NVRTC: reading the compiled program: ") +
                         nvrtcGetErrorString(result));
  return Status::ok();
}

namespace {

//===----------------------------------------------------------------------===//
// The process-wide cache
//===----------------------------------------------------------------------===//

struct Module {
  cudaLibrary_t library = nullptr;
  cudaKernel_t scalar = nullptr;
  cudaKernel_t vector = nullptr; // when the source has it
};

struct CacheEntry {
  std::mutex mutex;
  bool compiled = false;
  Status compileStatus; // compile errors are final
  std::string image;
  std::shared_ptr<const Module> module; // null until loaded
};

/// The cached module for `source`, compiling and loading it when needed.
/// Compile failures are remembered; load failures (no device yet) are not.
StatusOr<std::shared_ptr<const Module>>
moduleFor(const std::string &source, int computeCapability, bool hasVector) {
  // Leaked on purpose: see the file comment.
  static std::mutex *mutex = new std::mutex;
  static auto *cache =
      new std::unordered_map<std::string, std::shared_ptr<CacheEntry>>;
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    std::shared_ptr<CacheEntry> &slot =
        (*cache)["sm_" + std::to_string(computeCapability) + "\n" + source];
    if (!slot)
      slot = std::make_shared<CacheEntry>();
    entry = slot;
  }
  // Only this entry is held while it compiles: other programs compile in
  // parallel.
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (entry->module)
    return entry->module;
  if (!entry->compiled) {
    entry->compileStatus =
        compileElementwise(source, computeCapability, entry->image);
    entry->compiled = true;
  }
  if (!entry->compileStatus)
    return entry->compileStatus;
  auto module = std::make_shared<Module>();
  if (Status s = cudaStatus(
          cudaLibraryLoadData(&module->library, entry->image.data(), nullptr,
                              nullptr, 0, nullptr, nullptr, 0),
          "loading an elementwise program");
      !s)
    return s;
  if (Status s =
          cudaStatus(cudaLibraryGetKernel(&module->scalar, module->library,
                                          kElementwiseKernel),
                     "finding the elementwise kernel");
      !s)
    return s;
  if (hasVector)
    if (Status s =
            cudaStatus(cudaLibraryGetKernel(&module->vector, module->library,
                                            kElementwiseVectorKernel),
                       "finding the elementwise vector kernel");
        !s)
      return s;
  entry->module = module;
  return entry->module;
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

class ElementwiseKernel : public CUDAKernel {
public:
  ElementwiseKernel(std::shared_ptr<const Module> module,
                    const Instruction &inst)
      : module_(std::move(module)), total_(inst.outputs[0].elements()) {
    for (const TensorRef &input : inst.inputs) {
      // Scalars are loaded one element at a time: only dense operands need
      // the vector's alignment.
      bool dense = input.elements() == total_;
      inputAlignment_.push_back(
          dense ? std::min<size_t>(16,
                                   kElementwiseVector * dtypeSize(input.dtype))
                : 1);
    }
    for (const TensorRef &output : inst.outputs)
      outputAlignment_.push_back(
          std::min<size_t>(16, kElementwiseVector * dtypeSize(output.dtype)));
  }

  Status launch(const LaunchContext &context, const void *const *inputs,
                void *const *outputs) override {
    if (total_ == 0)
      return Status::ok();
    const size_t count = inputAlignment_.size() + outputAlignment_.size();
    std::vector<const void *> values(count);
    std::vector<void *> args(count);
    bool vector = module_->vector && total_ % kElementwiseVector == 0;
    size_t k = 0;
    for (size_t i = 0; i < inputAlignment_.size(); ++i, ++k) {
      values[k] = inputs[i];
      vector = vector &&
               reinterpret_cast<uintptr_t>(inputs[i]) % inputAlignment_[i] == 0;
    }
    for (size_t o = 0; o < outputAlignment_.size(); ++o, ++k) {
      values[k] = outputs[o];
      vector =
          vector &&
          reinterpret_cast<uintptr_t>(outputs[o]) % outputAlignment_[o] == 0;
    }
    for (size_t i = 0; i < count; ++i)
      args[i] = &values[i];
    const int64_t items = vector ? total_ / kElementwiseVector : total_;
    constexpr int64_t kBlock = 256; // the source's __launch_bounds__
    const int64_t blocks =
        std::min<int64_t>((items + kBlock - 1) / kBlock, int64_t(1) << 16);
    cudaKernel_t kernel = vector ? module_->vector : module_->scalar;
    return cudaStatus(cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                       dim3(unsigned(blocks)),
                                       dim3(unsigned(kBlock)), args.data(), 0,
                                       context.stream),
                      "elementwise");
  }

private:
  std::shared_ptr<const Module> module_;
  int64_t total_;
  std::vector<size_t> inputAlignment_, outputAlignment_;
};

} // namespace

KernelOr cuda::createElementwise(const LaunchContext &context,
                                 const Instruction &inst) {
  auto isF16 = [](const TensorRef &ref) { return ref.dtype == DType::F16; };
  bool f16 = std::any_of(inst.inputs.begin(), inst.inputs.end(), isF16) ||
             std::any_of(inst.outputs.begin(), inst.outputs.end(), isF16);
  for (const ProgramOp &op : inst.program)
    f16 = f16 || op.dtype == DType::F16;
  if (f16)
    return Status::error("the CUDA backend has no f16 elementwise programs");
  if (context.computeCapability <= 0)
    return Status::error("elementwise: the launch context has no compute "
                         "capability (needed to compile the program)");
  auto module = moduleFor(elementwiseSource(inst), context.computeCapability,
                          elementwiseVectorizable(inst));
  if (!module)
    return module.status();
  return KernelPtr(new ElementwiseKernel(module.value(), inst));
}
