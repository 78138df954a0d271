//===- RepeatedBlocks.h - A model's repeated layers -------------*- C++ -*-===//
//
// Transformers repeat one block (a layer) many times. The planner compiles a
// model folded to one and two of its blocks per pipeline stage and
// extrapolates per block, as it does per microbatch (docs/design/planner.md,
// "Folding layers"); this finds the blocks.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_REPEATEDBLOCKS_H
#define LOOM_ANALYSIS_REPEATEDBLOCKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace mlir::loom {

/// A run of `count` consecutive blocks of `period` operations each in a
/// function's body (its parameter reads left out: they come first), the
/// first block starting at `ops[start]`. Every block computes the same
/// operations on its own parameters: block j + 1 reads block j's values
/// where block j reads block j − 1's (block 0: the values before the run),
/// and any other value they read (function arguments, values computed
/// before the run) is the same value in every block.
struct RepeatedBlocks {
  /// The body's operations but its parameter reads and terminator.
  SmallVector<Operation *> ops;
  size_t start = 0, period = 0, count = 0;

  Operation *op(size_t block, size_t offset) const {
    return ops[start + block * period + offset];
  }
};

/// The longest run of at least three repeated blocks in `function` (the
/// blocks as short as they can be), or nothing.
std::optional<RepeatedBlocks> findRepeatedBlocks(func::FuncOp function);

/// Deletes blocks `keep` … count − 1 of `blocks`: what read the last
/// block's values reads block keep − 1's instead. The parameters and
/// constants only they read are erased too. Fails, with `error` set, when
/// `keep` is 0 or more than the count, or when something after the run reads a
/// block that would not exist.
LogicalResult foldRepeatedBlocks(const RepeatedBlocks &blocks, size_t keep,
                                 std::string &error);

} // namespace mlir::loom

#endif // LOOM_ANALYSIS_REPEATEDBLOCKS_H
