//===- Kernels.h - Kernel registry of a runtime backend --------*- C++ -*-===//
//
// A backend executes the `kernel` instructions of a plan. Each kernel has two
// entry points: `check`, run once when a plan is loaded, which validates the
// operand count, dtypes, shapes and attributes of one instruction (so that a
// corrupt or hand-edited plan is an error, never an out-of-bounds access); and
// `run`, which executes it on resolved pointers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_H
#define LOOM_RUNTIME_KERNELS_H

#include "loom/Runtime/Plan.h"

#include <string>

namespace loomrt {

/// The operands of one instruction, resolved to memory. `inputs[i]` holds
/// `instruction.inputs[i]`, laid out densely in row-major order.
struct KernelArgs {
  const Instruction &instruction;
  const void *const *inputs;
  void *const *outputs;
  /// Where a kernel reports a runtime error that `check` cannot see (a label
  /// or gather index out of range). The first error wins; kernels set it under
  /// a lock, so it is safe from their worker threads. Null: errors are
  /// dropped. The caller checks it after `run` (the outputs are then
  /// unspecified).
  std::string *error = nullptr;
};

struct KernelInfo {
  /// Validates an instruction; the Status message says what is wrong (the
  /// caller adds the kernel name and plan line).
  Status (*check)(const Instruction &instruction);
  void (*run)(const KernelArgs &args);
};

/// Checks `instruction` against its kernel's contract
/// (docs/design/plan-format.md): operand counts, dtypes, shapes and
/// attributes, the same for every backend. Every backend runs it when it
/// loads a plan, so that a plan one backend accepts, all accept; a kernel
/// name that is not in the contract list is an error.
Status checkKernel(const Instruction &instruction);

/// Every kernel a plan may name, sorted.
std::vector<std::string> kernelNames();

/// The CPU backend's kernel named `name`, or null.
const KernelInfo *lookupCPUKernel(const std::string &name);

/// Every CPU kernel name, sorted (for docs and errors).
std::vector<std::string> cpuKernelNames();

} // namespace loomrt

#endif // LOOM_RUNTIME_KERNELS_H
