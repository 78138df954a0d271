//===- PadVocabulary.cpp - Vocabulary parameters tp splits evenly ---------===//
//
// Pads the parameters whose rows are a vocabulary (LM heads, embedding
// tables) to a multiple of the ranks that split them, as Megatron does.
// Each padded parameter is a new trainable `#loom.slice_of` its source that
// reaches past the source's end (the overhang is zeros), so that autodiff
// and the optimizer derive padded gradients and states, and the plan still
// names the weights after the source.
//
//===----------------------------------------------------------------------===//

#include "ClassChain.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include <functional>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPADVOCABULARY
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// `value` rounded up to a multiple of `multiple`.
int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

class VocabularyPadder {
public:
  VocabularyPadder(ModuleOp module) : module(module), symbols(module) {}

  /// The parameter `value` reads, through float casts.
  ParameterOp readOf(Value value) {
    while (auto cast = value.getDefiningOp<CastOp>())
      value = cast.getInput();
    auto param = value.getDefiningOp<ParamOp>();
    if (!param)
      return {};
    return symbols.lookup<ParameterOp>(param.getNameAttr().getAttr());
  }

  /// Pads `parameter`'s dimension `dim` to `width` (once): every read of
  /// it becomes a slice of the real rows of a read of the padded one.
  /// Returns false where the parameter cannot be padded.
  bool pad(ParameterOp parameter, int64_t dim, int64_t width) {
    StringAttr name = parameter.getSymNameAttr();
    if (padded.count(name))
      return padded[name].second == dim;
    RankedTensorType type = parameter.getTensorType();
    if (isa_and_present<SliceOfAttr, CastOfAttr>(
            parameter.getInitialValue().value_or(nullptr)) ||
        parameter.getSharding())
      return false;
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = width;
    auto paddedType = RankedTensorType::get(shape, type.getElementType());
    OpBuilder moduleBuilder(parameter);
    moduleBuilder.setInsertionPointAfter(parameter);
    auto piece = moduleBuilder.create<ParameterOp>(
        parameter.getLoc(),
        moduleBuilder.getStringAttr(parameter.getSymName() + "#padded"),
        TypeAttr::get(paddedType), parameter.getTrainableAttr(), ShardingAttr(),
        SliceOfAttr::get(module.getContext(),
                         FlatSymbolRefAttr::get(parameter.getSymNameAttr()),
                         SmallVector<int64_t>(shape.size(), 0)));
    symbols.insert(piece);
    // The source now only holds the weights.
    parameter.removeTrainableAttr();
    padded[name] = {piece, dim};

    SmallVector<ParamOp> reads;
    module.walk([&](ParamOp read) {
      if (read.getNameAttr().getAttr() == name)
        reads.push_back(read);
    });
    for (ParamOp read : reads) {
      OpBuilder builder(read);
      auto wide = builder.create<ParamOp>(
          read.getLoc(), paddedType,
          FlatSymbolRefAttr::get(piece.getSymNameAttr()));
      SmallVector<int64_t> starts(shape.size(), 0), strides(shape.size(), 1);
      auto real = builder.create<SliceOp>(read.getLoc(), wide, starts,
                                          type.getShape(), strides);
      read.getResult().replaceAllUsesWith(real.getResult());
      read.erase();
      slices.push_back(real);
    }
    return true;
  }

  /// `value` (a slice of a padded parameter's real rows, through float
  /// casts) with the padding: the read itself, or new casts of it.
  Value widened(Value value) {
    if (auto slice = value.getDefiningOp<SliceOp>()) {
      if (llvm::is_contained(slices, slice))
        return slice.getInput();
      return {};
    }
    auto castOp = value.getDefiningOp<CastOp>();
    if (!castOp)
      return {};
    Value input = widened(castOp.getInput());
    if (!input)
      return {};
    auto inputType = cast<RankedTensorType>(input.getType());
    OpBuilder builder(castOp);
    builder.setInsertionPointAfter(castOp);
    return builder.create<CastOp>(
        castOp.getLoc(),
        inputType.clone(getElementTypeOrSelf(castOp.getResult().getType())),
        input);
  }

  /// Pads the classes of the GEMM that makes `loss`'s logits.
  void padHead(CrossEntropyOp loss, int64_t ways) {
    int64_t classes = loss.getLogits().getType().getShape().back();
    int64_t multiple = 8 * ways;
    if (ShapedType::isDynamic(classes) || classes % multiple == 0)
      return;
    std::optional<ClassChain> chain =
        matchClassChain(loss.getLogits(), classes);
    if (!chain)
      return;
    MatmulOp matmul = chain->matmul;
    ParameterOp weight = readOf(matmul.getRhs());
    int64_t dim = classDimOfRhs(matmul);
    if (!weight || matmul.getRhs().getType().getRank() != 2)
      return;
    // A head narrower than its input (a classifier) is no vocabulary:
    // tensor parallelism leaves it whole, so there is nothing to pad.
    if (classes <= matmul.getRhs().getType().getDimSize(1 - dim))
      return;
    int64_t width = roundUp(classes, multiple);
    if (!pad(weight, dim, width))
      return;
    Value wide = widened(matmul.getRhs());
    if (!wide)
      return;
    matmul.getRhsMutable().assign(wide);
    OpBuilder builder(matmul);
    Operation *next =
        chain->steps.empty() ? loss.getOperation() : chain->steps.front();
    widenClasses(builder, matmul.getResult(), width, next);
    for (auto [index, step] : llvm::enumerate(chain->steps)) {
      // A [classes] bias: its parameter padded too where it is one, else
      // zeros appended. The chain operand is widened already.
      for (OpOperand &operand : step->getOpOperands()) {
        if (!isa<BiasAddOp, AddOp>(step) ||
            !isClassBias(operand.get(), classes))
          continue;
        Value wideBias;
        if (ParameterOp bias = readOf(operand.get());
            bias && pad(bias, 0, width))
          wideBias = widened(operand.get());
        if (!wideBias) {
          builder.setInsertionPoint(step);
          wideBias = padWithZeros(builder, step->getLoc(), operand.get(), 0,
                                  width - classes);
        }
        operand.set(wideBias);
      }
      Operation *after = index + 1 < chain->steps.size()
                             ? chain->steps[index + 1]
                             : loss.getOperation();
      widenClasses(builder, step->getResult(0), width, after);
    }
    loss.setClassesAttr(builder.getI64IntegerAttr(classes));
  }

  /// Pads the rows of the table `gather` looks up in, unless `ways`
  /// divides them; a table padded as a head is read padded.
  void padTable(GatherOp gather, int64_t ways) {
    if (gather.getAxis() != 0)
      return;
    // A table padded already (as a head, or for another lookup).
    if (Value wide = widened(gather.getInput())) {
      gather.getInputMutable().assign(wide);
      return;
    }
    ParameterOp table = readOf(gather.getInput());
    if (!table || table.getTensorType().getRank() != 2)
      return;
    int64_t rows = table.getTensorType().getDimSize(0);
    if (!table.getTrainable() || rows % ways == 0 ||
        !pad(table, 0, roundUp(rows, ways)))
      return;
    if (Value wide = widened(gather.getInput()))
      gather.getInputMutable().assign(wide);
  }

  /// Erases the slices (and casts of them) that no longer have a use.
  void eraseDead() {
    // Casts of the slice without users first, then the slice.
    std::function<bool(Operation *)> prune = [&](Operation *op) {
      for (Operation *user : llvm::to_vector(op->getUsers()))
        if (!isa<CastOp>(user) || !prune(user))
          return false;
      op->erase();
      return true;
    };
    for (SliceOp slice : slices)
      prune(slice);
  }

private:
  ModuleOp module;
  SymbolTable symbols;
  /// Padded parameters by source name: the piece and the padded dimension.
  DenseMap<StringAttr, std::pair<ParameterOp, int64_t>> padded;
  SmallVector<SliceOp> slices;
};

struct PadVocabularyPass : impl::LoomPadVocabularyBase<PadVocabularyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    constexpr int64_t kMaxWays = 1 << 12;
    if (ways < 1 || ways > kMaxWays) {
      module.emitError() << "loom-pad-vocabulary: ways must be in [1, "
                         << kMaxWays << "], not " << static_cast<int64_t>(ways);
      return signalPassFailure();
    }
    if (ways == 1)
      return;
    VocabularyPadder padder(module);
    SmallVector<CrossEntropyOp> losses;
    module.walk([&](CrossEntropyOp loss) {
      if (!loss.getClasses())
        losses.push_back(loss);
    });
    for (CrossEntropyOp loss : losses)
      padder.padHead(loss, ways);
    SmallVector<GatherOp> gathers;
    module.walk([&](GatherOp gather) { gathers.push_back(gather); });
    for (GatherOp gather : gathers)
      padder.padTable(gather, ways);
    padder.eraseDead();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
