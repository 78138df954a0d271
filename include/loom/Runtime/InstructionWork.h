//===- InstructionWork.h - What a plan instruction computes and moves -*- C++
//-*-===//
//
// The work of one kernel instruction as the planner's cost model counts it
// (lib/Analysis/PlanSimulation.cpp times it on a cluster): GEMM-like FLOPs,
// bytes moved, and an elementwise program's operations by kind. Here, in
// the runtime's plan library, because calibration (loom-run --calibrate,
// which also runs without the compiler) measures kernels against the same
// counts. Plain C++17: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_INSTRUCTIONWORK_H
#define LOOM_RUNTIME_INSTRUCTIONWORK_H

#include "loom/Runtime/Plan.h"

#include <map>
#include <string>

namespace loomrt {

/// What one kernel instruction computes and moves.
struct InstructionWork {
  /// FLOPs the kernel executes in GEMM-like loops (matmul, attention).
  double gemmFlops = 0;
  /// The same work as Megatron counts it (2104.04473, appendix): an
  /// attention backward counts twice its forward, as every backward does;
  /// the executed FLOPs also recompute the forward's scores.
  double modelFlops = 0;
  /// An attention's (query, key) pairs, rows x Sk, and its query rows'
  /// elements, rows x D (0 for any other kernel): a CPU kernel's time
  /// follows them more than its FLOPs (its softmax costs per score, its
  /// row-by-row products per row and head-dimension element).
  double scores = 0;
  double rowElements = 0;
  /// The smallest of the GEMM's M, N and K (0 when it has none).
  double gemmMinDim = 0;
  /// Bytes of the operands read and the results written.
  double bytes = 0;
  /// The GEMM operands' precision: "bf16" or "f32".
  std::string precision = "f32";
  /// An elementwise kernel's program: for each operation kind (`exp`,
  /// `div`, ...), the elements it computes in all (each operation runs
  /// over the outputs' shape).
  std::map<std::string, double> elementOps;
};

/// The work of a kernel instruction (a collective has none).
InstructionWork estimateInstructionWork(const Instruction &inst);

} // namespace loomrt

#endif // LOOM_RUNTIME_INSTRUCTIONWORK_H
