//===- CutStages.cpp - Cut a forward function into pipeline stages --------===//
//
// Gives every op of the forward function its pipeline stage, cutting where
// the model is narrowest and the stages' costs are even (StageCuts.h).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/StageCuts.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMCUTSTAGES
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

struct CutStagesPass : impl::LoomCutStagesBase<CutStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError() << "loom-cut-stages: no function @" << function
                         << " to cut";
      return signalPassFailure();
    }
    std::string error;
    std::vector<std::string> cuts(stageCuts.begin(), stageCuts.end());
    std::optional<StagePlan> plan =
        cutIntoStages(func, int(stages), StageCostRates(), cuts,
                      memoryCapMB * double(1 << 20), error);
    if (!plan) {
      func.emitError() << "loom-cut-stages: " << error;
      return signalPassFailure();
    }
    Builder builder(&getContext());
    unsigned index = 0;
    for (Operation &op : func.getBody().front().without_terminator())
      op.setAttr(LoomDialect::kStageAttrName,
                 builder.getI64IntegerAttr(plan->stageOfOp[index++]));
    index = 0;
    std::vector<Operation *> ops;
    for (Operation &op : func.getBody().front().without_terminator())
      ops.push_back(&op);
    for (auto [stage, cut] : llvm::enumerate(plan->cuts)) {
      std::string seconds;
      llvm::raw_string_ostream os(seconds);
      os << llvm::format("%.3g", plan->seconds[stage] * 1e3);
      ops[cut.afterOp]->emitRemark()
          << "pipeline stage " << stage << " ends here (" << seconds
          << " ms forward and backward per microbatch, "
          << formatBytes(plan->parameterBytes[stage]) << " of parameters); "
          << formatBytes(cut.crossingBytes) << " of activations cross to stage "
          << stage + 1;
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
