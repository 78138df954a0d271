//===- KernelRegistry.cpp - The CPU backend's kernel table ----------------===//
//
// Maps kernel names to their check/run entry points, and holds the validation
// helpers every kernel's check shares.
//
//===----------------------------------------------------------------------===//

#include "CPUKernels.h"

#include <cstring>
#include <mutex>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {
struct NamedKernel {
  const char *name;
  KernelInfo info;
};

#define LOOM_ENTRY(name)                                                       \
  {                                                                            \
#name, { &check_##name, &run_##name }                                      \
  }

// Sorted by name, so that cpuKernelNames needs no sort and lookup can bisect.
const NamedKernel kKernels[] = {
    LOOM_ENTRY(attention),     LOOM_ENTRY(attention_backward),
    LOOM_ENTRY(concat),        LOOM_ENTRY(copy),
    LOOM_ENTRY(cross_entropy), LOOM_ENTRY(cross_entropy_backward),
    LOOM_ENTRY(cumsum),        LOOM_ENTRY(dropout),
    LOOM_ENTRY(elementwise),   LOOM_ENTRY(gather),
    LOOM_ENTRY(layer_norm),    LOOM_ENTRY(layer_norm_backward),
    LOOM_ENTRY(log_softmax),   LOOM_ENTRY(matmul),
    LOOM_ENTRY(reduce_max),    LOOM_ENTRY(reduce_mean),
    LOOM_ENTRY(reduce_sum),    LOOM_ENTRY(scatter_add),
    LOOM_ENTRY(slice),         LOOM_ENTRY(softmax),
    LOOM_ENTRY(split),         LOOM_ENTRY(transpose),
};
#undef LOOM_ENTRY

const char *attrKind(const AttrValue &value) {
  switch (value.index()) {
  case 0:
    return "an integer";
  case 1:
    return "a float";
  case 2:
    return "an integer list";
  default:
    return "a word";
  }
}

Status wrongKind(const std::string &name, const AttrValue &value,
                 const char *expected) {
  return Status::error("attribute '" + name + "' must be " + expected +
                       ", not " + attrKind(value));
}

Status missing(const std::string &name) {
  return Status::error("missing attribute '" + name + "'");
}

// Serializes error reports of all kernels; errors are rare, so one lock is
// enough.
std::mutex errorMutex;
} // namespace

const KernelInfo *loomrt::lookupCPUKernel(const std::string &name) {
  const NamedKernel *begin = std::begin(kKernels), *end = std::end(kKernels);
  const NamedKernel *it = std::lower_bound(
      begin, end, name, [](const NamedKernel &k, const std::string &n) {
        return std::strcmp(k.name, n.c_str()) < 0;
      });
  if (it == end || name != it->name)
    return nullptr;
  return &it->info;
}

// The contracts are the CPU kernels' checks: they live with the CPU kernels
// (LoomCPUKernels), which the device backends link for them, not with the
// CPU backend's executor side.
Status loomrt::checkKernel(const Instruction &instruction) {
  const KernelInfo *kernel = lookupCPUKernel(instruction.kernel);
  if (!kernel)
    return Status::error("unknown kernel '" + instruction.kernel + "'");
  return kernel->check(instruction);
}

std::vector<std::string> loomrt::kernelNames() { return cpuKernelNames(); }

std::vector<std::string> loomrt::cpuKernelNames() {
  std::vector<std::string> names;
  for (const NamedKernel &kernel : kKernels)
    names.push_back(kernel.name);
  return names;
}

Status cpu::expectOperandCounts(const Instruction &instruction, size_t inputs,
                                size_t outputs) {
  if (instruction.inputs.size() != inputs ||
      instruction.outputs.size() != outputs)
    return Status::error("expected " + std::to_string(inputs) +
                         " input(s) and " + std::to_string(outputs) +
                         " output(s), got " +
                         std::to_string(instruction.inputs.size()) + " and " +
                         std::to_string(instruction.outputs.size()));
  return Status::ok();
}

Status cpu::expectFloat(DType dtype, const std::string &what) {
  if (dtype == DType::F32 || dtype == DType::F64)
    return Status::ok();
  return Status::error(what + " has dtype " + dtypeName(dtype) +
                       "; only f32 and f64 are supported");
}

Status cpu::expectFloatOrBF16(DType dtype, const std::string &what) {
  if (dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16)
    return Status::ok();
  return Status::error(what + " has dtype " + dtypeName(dtype) +
                       "; only f32, f64 and bf16 are supported");
}

Status cpu::expectComputable(DType dtype, const std::string &what) {
  if (dtype == DType::F16)
    return Status::error(what + " has dtype " + dtypeName(dtype) +
                         ", which the CPU backend does not support");
  return Status::ok();
}

Status cpu::expectSupported(DType dtype, const std::string &what) {
  if (dtype == DType::F16 || dtype == DType::BF16)
    return Status::error(what + " has dtype " + dtypeName(dtype) +
                         ", which the CPU backend does not support");
  return Status::ok();
}

Status cpu::expectSameDType(const TensorRef &a, const std::string &aName,
                            const TensorRef &b, const std::string &bName) {
  if (a.dtype == b.dtype)
    return Status::ok();
  return Status::error(aName + " (" + dtypeName(a.dtype) + ") and " + bName +
                       " (" + dtypeName(b.dtype) +
                       ") must have the same dtype");
}

Status cpu::expectSameShape(const TensorRef &a, const std::string &aName,
                            const TensorRef &b, const std::string &bName) {
  if (a.shape == b.shape)
    return Status::ok();
  return Status::error(aName + " " + shapeString(a.shape) + " and " + bName +
                       " " + shapeString(b.shape) +
                       " must have the same shape");
}

Status cpu::expectKnownAttrs(const Attributes &attrs,
                             std::initializer_list<const char *> known) {
  for (const auto &entry : attrs) {
    bool found = false;
    for (const char *name : known)
      found |= entry.first == name;
    if (!found)
      return Status::error("unknown attribute '" + entry.first + "'");
  }
  return Status::ok();
}

Status cpu::getIntAttr(const Attributes &attrs, const std::string &name,
                       int64_t &value, bool required, int64_t fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (required)
      return missing(name);
    value = fallback;
    return Status::ok();
  }
  if (const int64_t *v = std::get_if<int64_t>(&it->second)) {
    value = *v;
    return Status::ok();
  }
  return wrongKind(name, it->second, "an integer");
}

Status cpu::getDoubleAttr(const Attributes &attrs, const std::string &name,
                          double &value, bool required, double fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (required)
      return missing(name);
    value = fallback;
    return Status::ok();
  }
  if (const double *v = std::get_if<double>(&it->second)) {
    value = *v;
    return Status::ok();
  }
  if (const int64_t *v = std::get_if<int64_t>(&it->second)) {
    value = double(*v);
    return Status::ok();
  }
  return wrongKind(name, it->second, "a number");
}

Status cpu::getIntListAttr(const Attributes &attrs, const std::string &name,
                           std::vector<int64_t> &value, bool required) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (required)
      return missing(name);
    value.clear();
    return Status::ok();
  }
  if (const auto *v = std::get_if<std::vector<int64_t>>(&it->second)) {
    value = *v;
    return Status::ok();
  }
  return wrongKind(name, it->second, "an integer list");
}

Status cpu::getWordAttr(const Attributes &attrs, const std::string &name,
                        std::string &value, bool required,
                        const std::string &fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    if (required)
      return missing(name);
    value = fallback;
    return Status::ok();
  }
  if (const auto *v = std::get_if<std::string>(&it->second)) {
    value = *v;
    return Status::ok();
  }
  return wrongKind(name, it->second, "a word");
}

Status cpu::normalizeAxis(int64_t axis, int64_t rank, int64_t &normalized) {
  if (axis < -rank || axis >= rank)
    return Status::error("axis " + std::to_string(axis) +
                         " is out of range for rank " + std::to_string(rank));
  normalized = axis < 0 ? axis + rank : axis;
  return Status::ok();
}

void cpu::reportError(const KernelArgs &args, const std::string &message) {
  if (!args.error)
    return;
  std::lock_guard<std::mutex> lock(errorMutex);
  if (args.error->empty())
    *args.error = message;
}
