//===- FoldRepeatedBlocks.cpp - Keep the first few repeated blocks --------===//
//
// The planner's layer folding: a model with one or two of its repeated
// layers, whose costs it extrapolates to all of them
// (lib/Analysis/RepeatedBlocks.h).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/RepeatedBlocks.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/Parallel/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFOLDREPEATEDBLOCKS
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

struct FoldRepeatedBlocksPass
    : impl::LoomFoldRepeatedBlocksBase<FoldRepeatedBlocksPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError() << "loom-fold-repeated-blocks: no function @"
                         << function;
      return signalPassFailure();
    }
    std::optional<RepeatedBlocks> blocks = findRepeatedBlocks(func);
    if (!blocks) {
      func.emitError() << "loom-fold-repeated-blocks: @" << function
                       << " repeats no block three times or more";
      return signalPassFailure();
    }
    blocks->op(0, 0)->emitRemark()
        << "loom-fold-repeated-blocks: " << blocks->count
        << " repeated blocks of " << blocks->period
        << " operations start here; keeping " << unsigned(keep);
    std::string error;
    if (failed(foldRepeatedBlocks(*blocks, unsigned(keep), error))) {
      func.emitError() << "loom-fold-repeated-blocks: " << error;
      return signalPassFailure();
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
