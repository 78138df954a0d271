//===- SplitFusedProjections.cpp - One GEMM per piece of a fused weight ---===//
//
// A fused projection (GPT-2's c_attn: one [3h, h] weight whose output is
// split into query, key and value) cannot be split by heads as one tensor:
// rank r needs rows r of each third, which no block of the weight is.
// Splitting the GEMM into one per piece, each with its own parameter (a
// `#loom.slice_of` the fused one), makes every piece a weight that tensor
// parallelism splits by heads like any other, while the plan still names
// their weights after the fused parameter so that it is saved whole.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSPLITFUSEDPROJECTIONS
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// The parameter `value` reads, if that read has no other user than `user`
/// and the parameter no other read.
ParameterOp soleRead(Value value, Operation *user, ModuleOp module,
                     const DenseMap<StringAttr, unsigned> &readCounts) {
  auto param = value.getDefiningOp<ParamOp>();
  if (!param || !param->hasOneUse() || *param->user_begin() != user)
    return {};
  StringAttr name = param.getNameAttr().getAttr();
  if (readCounts.lookup(name) != 1)
    return {};
  return module.lookupSymbol<ParameterOp>(name);
}

struct SplitFusedProjectionsPass
    : impl::LoomSplitFusedProjectionsBase<SplitFusedProjectionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseMap<StringAttr, unsigned> readCounts;
    module.walk(
        [&](ParamOp param) { ++readCounts[param.getNameAttr().getAttr()]; });
    SmallVector<SplitOp> splits;
    module.walk([&](SplitOp split) { splits.push_back(split); });
    SymbolTable symbols(module);
    for (SplitOp split : splits)
      rewrite(split, module, symbols, readCounts);
  }

  /// `split(add(bias, matmul(x, weight)))` along the output features, with
  /// equal pieces, each value used once, becomes one GEMM and bias per piece.
  void rewrite(SplitOp split, ModuleOp module, SymbolTable &symbols,
               const DenseMap<StringAttr, unsigned> &readCounts) {
    auto type = cast<RankedTensorType>(split.getInput().getType());
    if (int64_t(split.getAxis()) != type.getRank() - 1 ||
        !split.getInput().hasOneUse())
      return;
    Operation *add = split.getInput().getDefiningOp();
    if (!add || !isa<AddOp, BiasAddOp>(add))
      return;
    // The bias is the 1-D operand, the GEMM the other.
    Value lhs = add->getOperand(0), rhs = add->getOperand(1);
    if (cast<RankedTensorType>(lhs.getType()).getRank() == 1)
      std::swap(lhs, rhs);
    auto matmul = lhs.getDefiningOp<MatmulOp>();
    if (!matmul || !matmul->hasOneUse() ||
        cast<RankedTensorType>(rhs.getType()).getRank() != 1 ||
        matmul.getTransposeLhs())
      return;
    ParameterOp weight = soleRead(matmul.getRhs(), matmul, module, readCounts);
    ParameterOp bias = soleRead(rhs, add, module, readCounts);
    // Both with values, or both without: a model imported shapes-only
    // (--no-weights, the planner) must be split as its weighted import is,
    // or its plan would not be the one that runs.
    if (!weight || !bias ||
        bool(weight.getInitialValue()) != bool(bias.getInitialValue()) ||
        weight.getSharding() || bias.getSharding())
      return;
    unsigned features = matmul.getTransposeRhs() ? 0 : 1;
    RankedTensorType weightType = weight.getTensorType();
    int64_t pieces = split.getNumResults();
    if (weightType.getRank() != 2 ||
        weightType.getDimSize(features) != type.getDimSize(type.getRank() - 1))
      return;
    for (Value piece : split.getResults())
      if (cast<RankedTensorType>(piece.getType()).getShape().back() !=
          type.getShape().back() / pieces)
        return;

    OpBuilder moduleBuilder(weight);
    OpBuilder builder(split);
    int64_t size = type.getShape().back() / pieces;
    auto makePiece = [&](ParameterOp whole, unsigned dim, int64_t index) {
      RankedTensorType wholeType = whole.getTensorType();
      SmallVector<int64_t> shape(wholeType.getShape());
      shape[dim] = size;
      SmallVector<int64_t> offsets(shape.size(), 0);
      offsets[dim] = index * size;
      auto pieceType = RankedTensorType::get(shape, wholeType.getElementType());
      auto parameter = moduleBuilder.create<ParameterOp>(
          whole.getLoc(),
          moduleBuilder.getStringAttr(whole.getSymName() + "#" + Twine(index)),
          TypeAttr::get(pieceType), whole.getTrainableAttr(), ShardingAttr(),
          SliceOfAttr::get(&getContext(),
                           FlatSymbolRefAttr::get(whole.getSymNameAttr()),
                           offsets));
      StringAttr name = symbols.insert(parameter);
      return builder.create<ParamOp>(whole.getLoc(), pieceType,
                                     FlatSymbolRefAttr::get(name));
    };
    for (auto [index, piece] : llvm::enumerate(split.getResults())) {
      ParamOp pieceWeight = makePiece(weight, features, index);
      ParamOp pieceBias = makePiece(bias, 0, index);
      auto product = builder.create<MatmulOp>(
          matmul.getLoc(), piece.getType(), matmul.getLhs(), pieceWeight,
          matmul.getTransposeLhsAttr(), matmul.getTransposeRhsAttr());
      Operation *sum = builder.clone(*add);
      sum->setOperands({product, pieceBias});
      if (isa<AddOp>(add) && add->getOperand(0) == rhs)
        sum->setOperands({pieceBias, product});
      sum->getResult(0).setType(piece.getType());
      piece.replaceAllUsesWith(sum->getResult(0));
    }
    Operation *weightRead = matmul.getRhs().getDefiningOp();
    Operation *biasRead = rhs.getDefiningOp();
    split.erase();
    add->erase();
    matmul.erase();
    weightRead->erase();
    biasRead->erase();
    // The fused parameters now only hold the pieces' values.
    weight.removeTrainableAttr();
    bias.removeTrainableAttr();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
