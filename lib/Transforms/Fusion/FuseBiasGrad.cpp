//===- FuseBiasGrad.cpp - Bias gradients inside the weight-gradient GEMM --===//
//
// A linear layer's backward reads its output gradient three times: the
// input-gradient GEMM, the weight-gradient GEMM (which contracts the
// gradient over the layer's rows) and the bias gradient, a sum over the
// same rows. The last two walk the same rows of the same tensor, so the
// weight-gradient GEMM can sum them as it goes (cuBLASLt's BGRADA/BGRADB
// epilogues): at GPT-2 size the separate sums read 1.4 GB per step in 49
// launches. The fused op rounds the sum to the GEMM's element type, so
// under mixed precision the bias gradient is rounded to bf16 before the
// optimizer widens it (as torch.autocast's bf16 bias gradient is); in f32
// the values are the sum's.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEBIASGRAD
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// Whether `sum` is a bias gradient: it reduces every dimension of its
/// input but the last, and returns the input's element type or (a narrow
/// input summed in f32, as loom-narrow-bias-gradients leaves it) f32.
bool isBiasGradient(ReduceSumOp sum) {
  auto input = cast<RankedTensorType>(sum.getInput().getType());
  int64_t rank = input.getRank();
  if (rank < 2 || !llvm::equal(sum.getAxes(), llvm::seq<int64_t>(0, rank - 1)))
    return false;
  Type in = input.getElementType(),
       out = cast<RankedTensorType>(sum.getType()).getElementType();
  return in == out || (out.isF32() && (in.isBF16() || in.isF16()));
}

/// Whether `operand` holds `value`'s elements as the [rows, last dimension]
/// matrix a GEMM contracts over its rows: `value` itself or a reshape of
/// it that keeps the last dimension.
bool isRowsOf(Value operand, Value value) {
  if (operand != value) {
    auto reshape = operand.getDefiningOp<ReshapeOp>();
    if (!reshape || reshape.getInput() != value)
      return false;
  }
  auto matrix = cast<RankedTensorType>(operand.getType());
  auto type = cast<RankedTensorType>(value.getType());
  return matrix.getRank() == 2 &&
         matrix.getDimSize(1) == type.getShape().back();
}

/// A weight-gradient GEMM (lhs^T rhs, both [K, *]) in `sum`'s block that
/// contracts `sum`'s input over its rows; `summed` says which operand.
MatmulOp findWeightGradient(ReduceSumOp sum, MatmulOperand &summed) {
  Value gradient = sum.getInput();
  auto elementType = getElementTypeOrSelf(gradient.getType());
  auto visit = [&](Value use) -> MatmulOp {
    for (Operation *user : use.getUsers()) {
      auto matmul = dyn_cast<MatmulOp>(user);
      if (!matmul || matmul->getBlock() != sum->getBlock() ||
          !matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
          getElementTypeOrSelf(matmul.getType()) != elementType ||
          cast<RankedTensorType>(matmul.getType()).getRank() != 2)
        continue;
      if (isRowsOf(matmul.getLhs(), gradient)) {
        summed = MatmulOperand::lhs;
        return matmul;
      }
      if (isRowsOf(matmul.getRhs(), gradient)) {
        summed = MatmulOperand::rhs;
        return matmul;
      }
    }
    return {};
  };
  if (MatmulOp matmul = visit(gradient))
    return matmul;
  for (Operation *user : gradient.getUsers())
    if (auto reshape = dyn_cast<ReshapeOp>(user))
      if (MatmulOp matmul = visit(reshape.getResult()))
        return matmul;
  return {};
}

/// The order of the ops of the function as the pass found them, so that
/// comparing two of them costs a lookup: each fusion inserts ops, which
/// makes MLIR renumber the whole block at the next isBeforeInBlock (a
/// 96-layer GPT's step has ~60k ops and hundreds of fusions). Inserting ops
/// keeps the order of the others; an op that moves or is erased leaves the
/// table, and comparisons with ops outside it ask the block.
class OpOrder {
public:
  explicit OpOrder(Operation *root) {
    root->walk([&](Block *block) {
      int64_t index = 0;
      for (Operation &op : *block)
        positions[&op] = index++;
    });
  }

  /// Whether `a` comes before `b`, both in the same block.
  bool isBefore(Operation *a, Operation *b) const {
    auto first = positions.find(a), second = positions.find(b);
    if (first != positions.end() && second != positions.end())
      return first->second < second->second;
    return a->isBeforeInBlock(b);
  }

  /// Called before `op` moves or is erased.
  void forget(Operation *op) { positions.erase(op); }

private:
  DenseMap<Operation *, int64_t> positions;
};

bool definedBefore(Value value, Operation *op, const OpOrder &order) {
  Operation *def = value.getDefiningOp();
  return !def || (def->getBlock() == op->getBlock() && order.isBefore(def, op));
}

bool usedAfter(Value value, Operation *op, const OpOrder &order) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    return user->getBlock() == op->getBlock() && order.isBefore(op, user);
  });
}

/// Whether `operand` of the GEMM is defined before `sum`, or is a reshape
/// of a value that is, which can move up to the sum (autodiff reshapes the
/// GEMM's operands to matrices right before it).
bool availableAt(Value operand, ReduceSumOp sum, const OpOrder &order) {
  if (definedBefore(operand, sum, order))
    return true;
  auto reshape = operand.getDefiningOp<ReshapeOp>();
  return reshape && definedBefore(reshape.getInput(), sum, order);
}

/// Where the fused op can stand: at the GEMM when every use of the sum
/// follows it, else at the sum when the GEMM's operands are available
/// there (autodiff reshapes the bias gradient right after the sum and the
/// GEMM's operands right before it); null if neither holds.
Operation *insertionPoint(MatmulOp matmul, ReduceSumOp sum,
                          const OpOrder &order) {
  if (order.isBefore(sum, matmul) ? usedAfter(sum.getResult(), matmul, order)
                                  : true)
    return matmul;
  if (availableAt(matmul.getLhs(), sum, order) &&
      availableAt(matmul.getRhs(), sum, order))
    return sum;
  return nullptr;
}

void fuse(MatmulOp matmul, ReduceSumOp sum, MatmulOperand summed,
          Operation *anchor, OpOrder &order) {
  if (anchor == sum.getOperation())
    for (Value operand : {matmul.getLhs(), matmul.getRhs()})
      if (!definedBefore(operand, sum, order)) {
        order.forget(operand.getDefiningOp());
        operand.getDefiningOp()->moveBefore(sum); // a reshape (availableAt)
      }
  OpBuilder builder(anchor);
  auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
  int64_t columns = (summed == MatmulOperand::lhs ? lhs : rhs).getDimSize(1);
  auto biasType = RankedTensorType::get({columns}, lhs.getElementType());
  Location loc = builder.getFusedLoc({matmul.getLoc(), sum.getLoc()});
  auto fused = builder.create<MatmulBiasGradOp>(
      loc, TypeRange{matmul.getType(), biasType}, matmul.getLhs(),
      matmul.getRhs(), summed);
  Value bias = fused.getBiasGrad();
  auto sumType = cast<RankedTensorType>(sum.getType());
  if (sumType.getElementType() != biasType.getElementType())
    bias = builder.create<CastOp>(
        sum.getLoc(),
        RankedTensorType::get({columns}, sumType.getElementType()), bias);
  // Autodiff reshapes the (kept-dims) sum back to the bias's shape: those
  // reshapes read the vector directly, so that the widening can join the
  // optimizer's kernel.
  for (Operation *user : llvm::make_early_inc_range(sum->getUsers()))
    if (auto reshape = dyn_cast<ReshapeOp>(user);
        reshape && reshape.getType() == bias.getType()) {
      reshape.getResult().replaceAllUsesWith(bias);
      order.forget(reshape);
      reshape.erase();
    }
  if (bias.getType() != sumType && !sum.getResult().use_empty())
    bias = builder.create<ReshapeOp>(sum.getLoc(), sumType, bias);
  matmul.getResult().replaceAllUsesWith(fused.getResult());
  sum.getResult().replaceAllUsesWith(bias);
  order.forget(matmul);
  order.forget(sum);
  matmul.erase();
  sum.erase();
}

struct FuseBiasGradPass : impl::LoomFuseBiasGradBase<FuseBiasGradPass> {
  void runOnOperation() override {
    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp sum) {
      if (isBiasGradient(sum))
        sums.push_back(sum);
    });
    OpOrder order(getOperation());
    for (ReduceSumOp sum : sums) {
      MatmulOperand summed;
      if (MatmulOp matmul = findWeightGradient(sum, summed))
        if (Operation *anchor = insertionPoint(matmul, sum, order))
          fuse(matmul, sum, summed, anchor, order);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
