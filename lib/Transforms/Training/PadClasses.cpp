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

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPADCLASSES
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// The ops from a matmul that produces the classes (`[..., V]`) down to a
/// cross-entropy's logits, which all keep the classes last.
struct ClassChain {
  MatmulOp matmul;
  /// Casts, reshapes and bias additions after the matmul, in order.
  SmallVector<Operation *> steps;
};

/// Whether `bias` is a `[classes]` vector (what a linear layer adds).
bool isClassBias(Value bias, int64_t classes) {
  auto type = cast<RankedTensorType>(bias.getType());
  return type.getRank() == 1 && type.getDimSize(0) == classes;
}

/// Walks up from `logits` ([..., classes]) to the matmul that makes them;
/// std::nullopt at the first op that is not part of the pattern.
std::optional<ClassChain> matchChain(Value logits, int64_t classes) {
  ClassChain chain;
  Value value = logits;
  while (true) {
    auto type = cast<RankedTensorType>(value.getType());
    if (!type.hasStaticShape() || type.getShape().back() != classes)
      return std::nullopt;
    Operation *def = value.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto matmul = dyn_cast<MatmulOp>(def)) {
      chain.matmul = matmul;
      std::reverse(chain.steps.begin(), chain.steps.end());
      return chain;
    }
    if (auto cast = dyn_cast<CastOp>(def)) {
      if (!isa<FloatType>(getElementTypeOrSelf(cast.getInput().getType())))
        return std::nullopt;
      value = cast.getInput();
    } else if (auto reshape = dyn_cast<ReshapeOp>(def)) {
      value = reshape.getInput();
    } else if (auto biasAdd = dyn_cast<BiasAddOp>(def)) {
      value = biasAdd.getInput();
    } else if (auto add = dyn_cast<AddOp>(def)) {
      // One operand has the result's shape, the other is a [classes] bias.
      if (add.getLhs().getType() == type && isClassBias(add.getRhs(), classes))
        value = add.getLhs();
      else if (add.getRhs().getType() == type &&
               isClassBias(add.getLhs(), classes))
        value = add.getRhs();
      else
        return std::nullopt;
    } else {
      return std::nullopt;
    }
    chain.steps.push_back(def);
  }
}

/// `value` with `extra` zeros appended along `axis`.
Value padWithZeros(OpBuilder &builder, Location loc, Value value, int64_t axis,
                   int64_t extra) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = extra;
  auto zerosType = RankedTensorType::get(shape, type.getElementType());
  Value zeros = builder.create<ConstantOp>(
      loc, zerosType, cast<ElementsAttr>(builder.getZeroAttr(zerosType)));
  return builder.create<ConcatOp>(loc, ValueRange{value, zeros}, axis);
}

/// Gives `value` (of `[..., classes]`) the padded `width` in place. Its
/// uses other than `keep` read a slice of the first `classes` entries.
void widen(OpBuilder &builder, Value value, int64_t width, Operation *keep) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> padded(type.getShape());
  padded.back() = width;
  value.setType(
      RankedTensorType::get(padded, type.getElementType(), type.getEncoding()));
  if (llvm::all_of(value.getUsers(),
                   [&](Operation *user) { return user == keep; }))
    return;
  builder.setInsertionPointAfterValue(value);
  auto slice =
      builder.create<SliceOp>(value.getLoc(), value, starts, limits, strides);
  value.replaceUsesWithIf(slice, [&](OpOperand &use) {
    return use.getOwner() != keep && use.getOwner() != slice;
  });
}

/// Pads the classes of `chain` to `width` and tells `loss` which are real.
void pad(ClassChain &chain, CrossEntropyOp loss, int64_t classes,
         int64_t width) {
  OpBuilder builder(chain.matmul);
  MatmulOp matmul = chain.matmul;
  int64_t rhsRank = matmul.getRhs().getType().getRank();
  int64_t columns = matmul.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;
  matmul.getRhsMutable().assign(padWithZeros(
      builder, matmul.getLoc(), matmul.getRhs(), columns, width - classes));
  Operation *next =
      chain.steps.empty() ? loss.getOperation() : chain.steps.front();
  widen(builder, matmul.getResult(), width, next);
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
    widen(builder, step->getResult(0), width, after);
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
      std::optional<ClassChain> chain = matchChain(loss.getLogits(), classes);
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
