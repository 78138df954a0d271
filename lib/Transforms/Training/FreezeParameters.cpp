//===- FreezeParameters.cpp - Freeze parameters by name pattern -----------===//
//
// Users freeze by name (an embedding table, a backbone), as they would set
// requires_grad=False in PyTorch; the training step then leaves those
// parameters alone.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Support/NameRegex.h"
#include "loom/Transforms/Training/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFREEZEPARAMETERS
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

struct FreezeParametersPass
    : impl::LoomFreezeParametersBase<FreezeParametersPass> {
  using LoomFreezeParametersBase::LoomFreezeParametersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!freeze.empty()) {
      std::string error;
      std::unique_ptr<NameRegex> pattern = NameRegex::compile(freeze, error);
      if (!pattern) {
        module.emitError() << "--freeze '" << freeze
                           << "' is not a valid regular expression";
        return signalPassFailure();
      }
      for (auto parameter : module.getOps<ParameterOp>())
        if (pattern->search(parameter.getSymName().str()))
          parameter.setTrainable(false);
    }
    if (llvm::any_of(module.getOps<ParameterOp>(),
                     [](auto parameter) { return parameter.getTrainable(); }))
      return;
    InFlightDiagnostic diag = module.emitError()
                              << "the model has no trainable parameters "
                                 "(float initializers";
    if (freeze.empty())
      diag << ")";
    else
      diag << "; --freeze '" << freeze << "' matches them all)";
    signalPassFailure();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
