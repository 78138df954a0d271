//===- Registry.cpp - The CUDA backend's kernel table ---------------------===//
//
// createCUDAKernel validates an instruction first with the CPU kernel's own
// check (so that both backends accept the same plans and say the same thing
// about a malformed one), then hands it to the kernel family's factory, which
// adds the CUDA implementation's own restrictions and prepares it.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "loom/Runtime/Kernels.h"

#include <algorithm>
#include <cstring>

using namespace loomrt;
using namespace loomrt::cuda;

CUDAKernel::~CUDAKernel() = default;

namespace {

struct Entry {
  const char *name;
  KernelOr (*create)(const LaunchContext &, const Instruction &);
};

const Entry kKernels[] = {
    {"attention", createAttention},
    {"attention_backward", createAttentionBackward},
    {"concat", createConcat},
    {"copy", createCopy},
    {"cross_entropy", createCrossEntropy},
    {"cross_entropy_backward", createCrossEntropyBackward},
    {"cumsum", createCumsum},
    {"dropout", createDropout},
    {"elementwise", createElementwise},
    {"gather", createGather},
    {"layer_norm", createLayerNorm},
    {"layer_norm_backward", createLayerNormBackward},
    {"log_softmax", createSoftmax},
    {"matmul", createMatmul},
    {"reduce_max", createReduce},
    {"reduce_mean", createReduce},
    {"reduce_sum", createReduce},
    {"scatter_add", createScatterAdd},
    {"slice", createSlice},
    {"softmax", createSoftmax},
    {"split", createSplit},
    {"transpose", createTranspose},
};

} // namespace

KernelOr cuda::createCUDAKernel(const LaunchContext &context,
                                const Instruction &instruction) {
  if (instruction.kind != Instruction::Kind::Kernel)
    return Status::error("'" + instruction.kernel +
                         "' is not a kernel instruction");
  const Entry *entry = nullptr;
  for (const Entry &candidate : kKernels)
    if (instruction.kernel == candidate.name)
      entry = &candidate;
  if (!entry)
    return Status::error("unknown kernel '" + instruction.kernel + "'");
  if (Status s = checkKernel(instruction); !s)
    return s;
  return entry->create(context, instruction);
}

std::vector<std::string> cuda::cudaKernelNames() {
  std::vector<std::string> names;
  for (const Entry &entry : kKernels)
    names.push_back(entry.name);
  std::sort(names.begin(), names.end());
  return names;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t cuda::intAttr(const Attributes &attrs, const std::string &name,
                      int64_t fallback) {
  return loomrt::intAttrOr(attrs, name, fallback);
}

double cuda::doubleAttr(const Attributes &attrs, const std::string &name,
                        double fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return fallback;
  if (const double *value = std::get_if<double>(&it->second))
    return *value;
  if (const int64_t *value = std::get_if<int64_t>(&it->second))
    return double(*value);
  return fallback;
}

std::vector<int64_t> cuda::intListAttr(const Attributes &attrs,
                                       const std::string &name) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return {};
  if (const auto *value = std::get_if<std::vector<int64_t>>(&it->second))
    return *value;
  return {};
}

std::string cuda::wordAttr(const Attributes &attrs, const std::string &name,
                           const std::string &fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return fallback;
  if (const std::string *value = std::get_if<std::string>(&it->second))
    return *value;
  return fallback;
}

int64_t cuda::resolveAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

int64_t cuda::product(const std::vector<int64_t> &shape, size_t begin,
                      size_t end) {
  int64_t result = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i)
    result *= shape[i];
  return result;
}

Status cuda::cudaStatus(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::error(what + ": " + cudaGetErrorName(error) + " (" +
                       cudaGetErrorString(error) + ")");
}

Status cuda::expectDimsAtMost(size_t dims, const std::string &what) {
  if (dims <= size_t(kMaxDims))
    return Status::ok();
  return Status::error("the CUDA backend handles at most " +
                       std::to_string(kMaxDims) + " dims (after merging) in " +
                       what + ", got " + std::to_string(dims));
}
