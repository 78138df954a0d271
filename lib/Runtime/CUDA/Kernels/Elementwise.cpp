//===- Elementwise.cpp - The CUDA elementwise kernel (NVRTC) --------------===//
//
// Compiles each elementwise program's source (ElementwiseSource.cpp) with
// NVRTC when the kernel is created and loads it with the runtime's library
// API (context-independent: loaded into whichever device's context launches
// it). Compiled code is cached for the whole process by architecture and
// source, so executors on several threads (or devices of one architecture)
// compile each distinct program once. Cached libraries stay loaded until the
// process exits (unloading them from static destructors would race the CUDA
// runtime's own teardown). A backend compiles a whole plan's programs on a
// pool of threads first (compileElementwisePrograms). The GPT-2 benchmark's
// 309 elementwise kernels are 24 distinct programs, 1.2 s of NVRTC one
// after another on the development machine; plans whose layers differ have
// many more.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.h"
#include "Common.h"
#include "ElementwiseSpace.h"
#include "loom/Runtime/Kernels.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

using namespace loomrt;
using namespace loomrt::cuda;

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
      log.resize(std::strlen(log.c_str())); // the size counts the NUL
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
  /// The kernels moduleFor was asked for, in its order.
  std::vector<cudaKernel_t> kernels;
};

struct CacheEntry {
  std::mutex mutex;
  bool compiled = false;
  Status compileStatus; // compile errors are final
  std::string image;
  std::shared_ptr<const Module> module; // null until loaded
};

/// The cache entry of `source` for `computeCapability`, made when missing.
std::shared_ptr<CacheEntry> entryFor(const std::string &source,
                                     int computeCapability) {
  // Leaked on purpose: see the file comment.
  static std::mutex *mutex = new std::mutex;
  static auto *cache =
      new std::unordered_map<std::string, std::shared_ptr<CacheEntry>>;
  std::lock_guard<std::mutex> lock(*mutex);
  std::shared_ptr<CacheEntry> &slot =
      (*cache)["sm_" + std::to_string(computeCapability) + "\n" + source];
  if (!slot)
    slot = std::make_shared<CacheEntry>();
  return slot;
}

/// Compiles `entry` unless it was; the caller holds `entry->mutex`, so only
/// this entry waits while it compiles and other programs compile in
/// parallel. True when this call compiled it.
bool compileLocked(CacheEntry &entry, const std::string &source,
                   int computeCapability) {
  if (entry.compiled)
    return false;
  entry.compileStatus =
      compileElementwise(source, computeCapability, entry.image);
  entry.compiled = true;
  return true;
}

/// The cached module for `source` with its kernels `names`, compiling and
/// loading it when needed. Compile failures are remembered; load failures
/// (no device yet) are not.
StatusOr<std::shared_ptr<const Module>>
moduleFor(const std::string &source, int computeCapability,
          const std::vector<const char *> &names) {
  std::shared_ptr<CacheEntry> entry = entryFor(source, computeCapability);
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (entry->module)
    return entry->module;
  compileLocked(*entry, source, computeCapability);
  if (!entry->compileStatus)
    return entry->compileStatus;
  auto module = std::make_shared<Module>();
  if (Status s = cudaStatus(
          cudaLibraryLoadData(&module->library, entry->image.data(), nullptr,
                              nullptr, 0, nullptr, nullptr, 0),
          "loading an elementwise program");
      !s)
    return s;
  for (const char *name : names) {
    module->kernels.emplace_back();
    if (Status s = cudaStatus(cudaLibraryGetKernel(&module->kernels.back(),
                                                   module->library, name),
                              std::string("finding kernel ") + name);
        !s)
      return s;
  }
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
    bool vector =
        module_->kernels.size() > 1 && total_ % kElementwiseVector == 0;
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
    cudaKernel_t kernel = module_->kernels[vector ? 1 : 0];
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

/// One launch (or one per kElementwiseGroupWords' worth of members) for
/// several elementwise instructions of one signature.
class ElementwiseGroupKernel : public CUDAKernelGroup {
public:
  ElementwiseGroupKernel(std::shared_ptr<const Module> module,
                         const Instruction &inst)
      : module_(std::move(module)),
        record_(size_t(elementwiseGroupRecordWords(inst))),
        capacity_(size_t(elementwiseGroupCapacity(inst))) {
    const ElementwiseSpace space = elementwiseSpace(inst);
    // Scalars are loaded one element at a time: only dense operands need
    // the vector's alignment.
    for (size_t i = 0; i < inst.inputs.size(); ++i)
      alignment_.push_back(
          space.kinds[i] == ElementwiseSpace::InputKind::Scalar
              ? 1
              : std::min<size_t>(16, kElementwiseVector *
                                         dtypeSize(inst.inputs[i].dtype)));
    for (const TensorRef &output : inst.outputs)
      alignment_.push_back(
          std::min<size_t>(16, kElementwiseVector * dtypeSize(output.dtype)));
  }

  Status launch(const LaunchContext &context,
                const std::vector<GroupMember> &members) override {
    for (size_t first = 0; first < members.size(); first += capacity_) {
      const size_t count = std::min(capacity_, members.size() - first);
      std::fill(words_.begin(), words_.end(), 0);
      words_[0] = count;
      uint64_t blocks = 0;
      for (size_t k = 0; k < count; ++k) {
        const GroupMember &member = members[first + k];
        uint64_t *record = &words_[1 + k * record_];
        bool vector = member.elements % kElementwiseVector == 0;
        size_t w = 0;
        for (const void *input : member.inputs) {
          vector =
              vector && reinterpret_cast<uintptr_t>(input) % alignment_[w] == 0;
          record[w++] = reinterpret_cast<uintptr_t>(input);
        }
        for (void *output : member.outputs) {
          vector = vector &&
                   reinterpret_cast<uintptr_t>(output) % alignment_[w] == 0;
          record[w++] = reinterpret_cast<uintptr_t>(output);
        }
        record[w] = uint64_t(member.elements) | uint64_t(vector) << 32;
        record[w + 1] = blocks;
        blocks += (uint64_t(member.elements) + kElementwiseGroupChunk - 1) /
                  kElementwiseGroupChunk;
      }
      void *args[] = {words_.data()};
      if (Status s = cudaStatus(
              cudaLaunchKernel(
                  reinterpret_cast<const void *>(module_->kernels[0]),
                  dim3(unsigned(blocks)), dim3(256), args, 0, context.stream),
              "elementwise group");
          !s)
        return s;
    }
    return Status::ok();
  }

private:
  std::shared_ptr<const Module> module_;
  size_t record_, capacity_;
  /// Per operand (inputs, then outputs): what the vector path needs.
  std::vector<size_t> alignment_;
  /// The kernel's parameter; cudaLaunchKernel copies it.
  std::vector<uint64_t> words_ = std::vector<uint64_t>(kElementwiseGroupWords);
};

} // namespace

/// Whether `inst` computes in f16, which the CUDA elementwise kernel lacks.
static bool usesF16(const Instruction &inst) {
  auto isF16 = [](const TensorRef &ref) { return ref.dtype == DType::F16; };
  bool f16 = std::any_of(inst.inputs.begin(), inst.inputs.end(), isF16) ||
             std::any_of(inst.outputs.begin(), inst.outputs.end(), isF16);
  for (const ProgramOp &op : inst.program)
    f16 = f16 || op.dtype == DType::F16;
  return f16;
}

size_t
cuda::compileElementwisePrograms(const std::vector<Instruction> &instructions,
                                 const std::vector<ElementwiseBatch> &batches,
                                 int computeCapability, unsigned threads) {
  if (computeCapability <= 0)
    return 0;
  // Distinct sources, in plan order. Instructions the kernel check would
  // reject are left to createElementwise, which reports them.
  std::vector<std::string> sources;
  std::unordered_set<std::string> seen;
  for (const Instruction &inst : instructions) {
    if (inst.kind != Instruction::Kind::Kernel ||
        inst.kernel != "elementwise" || usesF16(inst))
      continue;
    if (!checkKernel(inst))
      continue;
    std::string source = elementwiseSource(inst);
    if (seen.insert(source).second)
      sources.push_back(std::move(source));
  }
  for (const ElementwiseBatch &batch : batches)
    for (const std::vector<size_t> &group : batch.groups) {
      std::string source = elementwiseGroupSource(instructions[group[0]]);
      if (seen.insert(source).second)
        sources.push_back(std::move(source));
    }
  std::atomic<size_t> next{0}, compiled{0};
  auto work = [&] {
    for (size_t i = next++; i < sources.size(); i = next++) {
      std::shared_ptr<CacheEntry> entry =
          entryFor(sources[i], computeCapability);
      std::lock_guard<std::mutex> lock(entry->mutex);
      if (compileLocked(*entry, sources[i], computeCapability))
        ++compiled;
    }
  };
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(sources.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &thread : pool)
    thread.join();
  return compiled;
}

KernelOr cuda::createElementwise(const LaunchContext &context,
                                 const Instruction &inst) {
  if (usesF16(inst))
    return Status::error("the CUDA backend has no f16 elementwise programs");
  if (context.computeCapability <= 0)
    return Status::error("elementwise: the launch context has no compute "
                         "capability (needed to compile the program)");
  std::vector<const char *> names = {kElementwiseKernel};
  if (elementwiseVectorizable(inst))
    names.push_back(kElementwiseVectorKernel);
  auto module =
      moduleFor(elementwiseSource(inst), context.computeCapability, names);
  if (!module)
    return module.status();
  return KernelPtr(new ElementwiseKernel(module.value(), inst));
}

CUDAKernelGroup::~CUDAKernelGroup() = default;

StatusOr<std::unique_ptr<CUDAKernelGroup>>
cuda::createElementwiseGroup(const LaunchContext &context,
                             const Instruction &representative) {
  if (elementwiseGroupSignature(representative).empty())
    return Status::error("elementwise group: the instruction cannot be a "
                         "group member");
  if (context.computeCapability <= 0)
    return Status::error("elementwise group: the launch context has no "
                         "compute capability (needed to compile the program)");
  auto module = moduleFor(elementwiseGroupSource(representative),
                          context.computeCapability, {kElementwiseGroupKernel});
  if (!module)
    return module.status();
  return std::unique_ptr<CUDAKernelGroup>(
      new ElementwiseGroupKernel(module.value(), representative));
}
