//===- FuseMatmulEpilogue.cpp - Bias and activation into the GEMM ---------===//
//
// A linear layer is a GEMM, a bias add and often an activation. As separate
// kernels the GEMM writes its product and an elementwise kernel reads it
// back; folded into the GEMM's epilogue the product is stored once, biased
// and activated. The rewrite takes chains whose ops share one element type
// (in f32 and f64 the fused op's "round once at the end" is then exactly
// what the chain did; in bf16 it drops the intermediate roundings) and
// products with no other use (the fused op no longer has the bare product).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEMATMULEPILOGUE
#include "loom/Transforms/Passes.h.inc"

namespace {

/// The ops of one linear layer that the epilogue takes over.
struct Epilogue {
  Operation *biasOp = nullptr;
  Value bias;
  Operation *activationOp = nullptr;
  MatmulActivation activation = MatmulActivation::none;
  /// Whether the value before the activation has uses besides it.
  bool keepPreactivation = false;
};

/// The bias `user` adds to `product`, if it is a bias: a bias_add, or an
/// add of a vector along the last dimension that leaves the type alone.
Value biasAddedBy(Operation *user, Value product) {
  auto type = cast<RankedTensorType>(product.getType());
  if (auto biasAdd = dyn_cast<BiasAddOp>(user))
    return biasAdd.getInput() == product ? biasAdd.getBias() : Value();
  auto add = dyn_cast<AddOp>(user);
  if (!add || add.getType() != type || add.getLhs() == add.getRhs())
    return {};
  Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto otherType = cast<RankedTensorType>(other.getType());
  if (otherType.getRank() != 1 ||
      otherType.getDimSize(0) != type.getShape().back() ||
      otherType.getElementType() != type.getElementType())
    return {};
  return other;
}

/// The activation an epilogue can apply to `value`, if one of its users is
/// one.
Operation *activationOf(Value value, MatmulActivation &kind) {
  for (Operation *user : value.getUsers()) {
    if (isa<ReluOp>(user)) {
      kind = MatmulActivation::relu;
      return user;
    }
    if (auto gelu = dyn_cast<GeluOp>(user);
        gelu && gelu.getApproximate() == GeluApproximation::tanh) {
      kind = MatmulActivation::gelu_tanh;
      return user;
    }
  }
  return nullptr;
}

std::optional<Epilogue> findEpilogue(MatmulOp matmul) {
  Value product = matmul.getResult();
  if (!product.hasOneUse())
    return std::nullopt;
  Epilogue epilogue;
  Operation *user = *product.getUsers().begin();
  if (Value bias = biasAddedBy(user, product)) {
    epilogue.biasOp = user;
    epilogue.bias = bias;
  }
  Value preactivation =
      epilogue.biasOp ? epilogue.biasOp->getResult(0) : product;
  MatmulActivation kind = MatmulActivation::none;
  if (Operation *activation = activationOf(preactivation, kind)) {
    bool otherUses = !preactivation.hasOneUse();
    // cuBLASLt's ReLU keeps only a bit mask of its input, so a ReLU whose
    // input is read elsewhere (its own backward) stays elementwise.
    if (!otherUses || kind == MatmulActivation::gelu_tanh) {
      epilogue.activationOp = activation;
      epilogue.activation = kind;
      epilogue.keepPreactivation = otherUses;
    }
  }
  if (!epilogue.biasOp && !epilogue.activationOp)
    return std::nullopt;
  return epilogue;
}

void fuse(MatmulOp matmul, const Epilogue &epilogue) {
  // At the bias add (or the matmul): every operand is defined by then, and
  // every use of what the fused op replaces comes after it.
  Operation *anchor = epilogue.biasOp ? epilogue.biasOp : matmul;
  OpBuilder builder(anchor);
  Type type = matmul.getType();
  SmallVector<Type, 2> resultTypes{type};
  if (epilogue.keepPreactivation)
    resultTypes.push_back(type);
  Location loc = epilogue.activationOp
                     ? builder.getFusedLoc({matmul.getLoc(), anchor->getLoc(),
                                            epilogue.activationOp->getLoc()})
                     : builder.getFusedLoc({matmul.getLoc(), anchor->getLoc()});
  auto fused = builder.create<FusedMatmulOp>(
      loc, resultTypes, matmul.getLhs(), matmul.getRhs(), epilogue.bias,
      matmul.getTransposeLhs(), matmul.getTransposeRhs(), epilogue.activation);
  Operation *last = epilogue.activationOp ? epilogue.activationOp : anchor;
  Value preactivation = anchor->getResult(0);
  last->getResult(0).replaceAllUsesWith(fused.getResult());
  if (epilogue.keepPreactivation)
    preactivation.replaceAllUsesWith(fused.getPreactivation());
  if (epilogue.activationOp)
    epilogue.activationOp->erase();
  if (epilogue.biasOp)
    epilogue.biasOp->erase();
  matmul.erase();
}

struct FuseMatmulEpiloguePass
    : impl::LoomFuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<std::pair<MatmulOp, Epilogue>> rewrites;
    getOperation().walk([&](MatmulOp matmul) {
      if (std::optional<Epilogue> epilogue = findEpilogue(matmul))
        rewrites.emplace_back(matmul, *epilogue);
    });
    for (auto &[matmul, epilogue] : rewrites)
      fuse(matmul, epilogue);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
