//===- TestPrintFactors.cpp - Print factor rules as remarks ---------------===//
//
// `loom-test-print-factors`: one remark per op that implements
// FactorRuleOpInterface, giving the op's name, its factors' kinds
// (`iterators`), their `sizes`, and the indexing map of every operand and
// then every result, in the linalg style. A rule that does not fit its op
// (wrong rank, sizes that do not multiply out) is an error. Lit tests pin
// each op's rule with -verify-diagnostics (test-print-factors.mlir):
//
//   loom.matmul: iterators = [parallel, parallel, contracting],
//   sizes = [8, 2048, 512], maps = [(d0, d1, d2) -> (d0, d2),
//   (d0, d1, d2) -> (d2, d1), (d0, d1, d2) -> (d0, d1)]
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
struct TestPrintFactorsPass
    : public PassWrapper<TestPrintFactorsPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintFactorsPass)

  StringRef getArgument() const final { return "loom-test-print-factors"; }
  StringRef getDescription() const final {
    return "Print every loom op's factor rule as a remark (for tests)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LoomDialect>();
  }

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

void mlir::loom::test::registerTestPrintFactorsPass() {
  PassRegistration<TestPrintFactorsPass>();
}
