//===- PadClasses.cpp - Aligned rows for the logits' GEMMs ----------------===//
//
// A vocabulary like GPT-2's (50257 entries) makes rows of logits that are
// not a multiple of 16 bytes in bf16, and cuBLASLt then has only its
// unaligned kernels for the forward GEMM and both of its gradients: the
// largest GEMMs of a language model's step. Padding the weight with zero
// columns gives aligned rows; the cross-entropy learns which leading entries
// are classes and leaves the rest out, so nothing the model computes
// changes. The padding is built in the forward graph, so autodiff derives
// the padded backward (the weight's gradient is a slice of the padded one).
//
//===----------------------------------------------------------------------===//

#include "ClassChain.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPADCLASSES
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// Pads the classes of `chain` to `width` and tells `loss` which are real.
void pad(ClassChain &chain, CrossEntropyOp loss, int64_t classes,
         int64_t width) {
  OpBuilder builder(chain.matmul);
  MatmulOp matmul = chain.matmul;
  int64_t columns = classDimOfRhs(matmul);
  matmul.getRhsMutable().assign(padWithZeros(
      builder, matmul.getLoc(), matmul.getRhs(), columns, width - classes));
  Operation *next =
      chain.steps.empty() ? loss.getOperation() : chain.steps.front();
  widenClasses(builder, matmul.getResult(), width, next);
  for (auto [i, step] : llvm::enumerate(chain.steps)) {
    // Bias operands get zeros too; the chain operand is already widened.
    for (OpOperand &operand : step->getOpOperands()) {
      auto type = cast<RankedTensorType>(operand.get().getType());
      if (type.getRank() == 1 && type.getDimSize(0) == classes &&
          (isa<BiasAddOp>(step) || isa<AddOp>(step))) {
        builder.setInsertionPoint(step);
        operand.set(padWithZeros(builder, step->getLoc(), operand.get(), 0,
                                 width - classes));
      }
    }
    Operation *after =
        i + 1 < chain.steps.size() ? chain.steps[i + 1] : loss.getOperation();
    widenClasses(builder, step->getResult(0), width, after);
  }
  loss.setClassesAttr(builder.getI64IntegerAttr(classes));
}

struct PadClassesPass : impl::LoomPadClassesBase<PadClassesPass> {
  using LoomPadClassesBase::LoomPadClassesBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // A bound far above any useful alignment, so that rounding up cannot
    // overflow.
    constexpr int64_t kMaxMultiple = 1 << 16;
    if (multiple < 1 || multiple > kMaxMultiple) {
      func.emitError() << "loom-pad-classes: multiple must be in [1, "
                       << kMaxMultiple << "], not "
                       << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    SmallVector<CrossEntropyOp> losses;
    func.walk([&](CrossEntropyOp loss) {
      if (!loss.getClasses())
        losses.push_back(loss);
    });
    for (CrossEntropyOp loss : losses) {
      int64_t classes = loss.getLogits().getType().getShape().back();
      if (ShapedType::isDynamic(classes) || classes % multiple == 0)
        continue;
      std::optional<ClassChain> chain =
          matchClassChain(loss.getLogits(), classes);
      if (!chain)
        continue;
      int64_t width = (classes + multiple - 1) / multiple * multiple;
      pad(*chain, loss, classes, width);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
