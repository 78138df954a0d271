//===- TestPrintFactors.cpp - Print factor rules as remarks ---------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMTESTPRINTFACTORS
#include "loom/Transforms/Passes.h.inc"

namespace {
struct TestPrintFactorsPass
    : impl::LoomTestPrintFactorsBase<TestPrintFactorsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](FactorRuleOpInterface op) {
      FactorRule rule = op.getFactorRule();
      if (failed(rule.verify(op)))
        return WalkResult::interrupt();
      std::string text;
      llvm::raw_string_ostream os(text);
      os << op->getName() << ": ";
      rule.print(os, op->getContext());
      op->emitRemark() << text;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
} // namespace loom
} // namespace mlir
