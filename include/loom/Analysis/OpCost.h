//===- OpCost.h - Work and traffic of ops from factor rules ----*- C++ -*-===//
//
// The first layer of Loom's cost model (docs/design/passes.md, lib/Analysis):
// how much arithmetic an op does and how many bytes it moves, read off the
// same factor rules that sharding propagation uses, so that every op the
// dialect can shard it can also cost. Pipeline stage cuts, the planner and
// the simulator add time (efficiency curves, bandwidths) on top.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_OPCOST_H
#define LOOM_ANALYSIS_OPCOST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

#include <cstdint>

namespace mlir {
namespace loom {

struct OpCost {
  /// Multiply-add FLOPs of contracting factors (2 per point of the iteration
  /// space): the GEMM work, as Megatron counts FLOPs (2104.04473).
  double matmulFlops = 0;
  /// One FLOP per point of every other op's iteration space: elementwise,
  /// reductions, normalizations (memory-bound work).
  double otherFlops = 0;
  /// Bytes of the tensor operands read and the results written, each once.
  double bytesRead = 0;
  double bytesWritten = 0;
  /// Ops without a factor rule (kernel-level ops after fusion, symbols):
  /// their bytes count, their FLOPs are unknown.
  int64_t opsWithoutRule = 0;

  double flops() const { return matmulFlops + otherFlops; }
  OpCost &operator+=(const OpCost &other);
};

/// The cost of one op. An op with a contracting factor does 2 FLOPs per
/// point of its iteration space (the product of its factors' sizes), any
/// other op with a factor rule 1. Ops without tensor operands or results
/// cost nothing.
OpCost estimateOpCost(Operation *op);

/// The sum over the ops of `func` (nested regions included), terminators
/// left out.
OpCost estimateFunctionCost(func::FuncOp func);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_OPCOST_H
