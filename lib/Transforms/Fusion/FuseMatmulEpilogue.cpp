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
// Mixed precision leaves one more form: a bf16 product widened to f32, an
// f32 bias added and the sum rounded back to bf16 for another bf16 op (a
// QKV projection feeding attention). cuBLASLt adds a bias of D's type
// only, so that chain becomes a bf16 GEMM whose epilogue adds the bias
// rounded to bf16 and rounds once: torch.autocast's bf16 `linear`.
//
// The same widened sum under a tanh GELU whose result is only read rounded
// to bf16 (a GPT MLP's first layer, whose result the second reads in bf16)
// becomes a bf16 GEMM with cuBLASLt's GELU_AUX_BIAS epilogue: the GELU of
// the f32 sum, rounded once, and the sum itself rounded to bf16 for the
// GELU's backward (every other use of the sum reads it so), which
// torch.autocast keeps in bf16 too. The bf16 product is no longer read
// back, widened and activated by an elementwise kernel (0.6 GB and 12
// kernels per GPT-2 step).
//
// And where that widened sum is added to an f32 tensor of its type (a
// residual connection: GPT-2's attention and MLP output projections), the
// GEMM computes all of it into an f32 result, the residual read as
// cuBLASLt's C with beta = 1: the bf16 product is neither stored nor read
// back (0.6 GB and 24 launches per GPT-2 step), and the sum is no longer
// rounded to bf16 before the bias and the residual are added.
//
// In the backward, the input gradient of the layer a tanh GELU feeds (a GPT
// MLP's second) is multiplied by the GELU's derivative: `loom.gelu_grad` of
// the GEMM's product becomes one `loom.matmul_gelu_grad`, cuBLASLt's DGELU
// epilogue reading the GELU's input, where an elementwise kernel read the
// stored product and that input again (1.2 GB per GPT-2 step). In bf16 the
// product is widened, the input is the forward's bf16 preactivation
// widened, and the result is only read rounded to bf16: the GEMM then
// rounds once, after the multiplication, where the separate ops rounded
// the product first (as a same-type bf16 chain drops its intermediate
// rounding). These are found after the forward rewrites, which make the
// preactivations they read.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEMATMULEPILOGUE
#include "loom/Transforms/Fusion/Passes.h.inc"

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

/// The op that uses `value`, if it has exactly one use (the rewrites
/// replace the value, so no other op may read it).
Operation *onlyUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

std::optional<Epilogue> findEpilogue(MatmulOp matmul) {
  Value product = matmul.getResult();
  Operation *user = onlyUser(product);
  if (!user)
    return std::nullopt;
  Epilogue epilogue;
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

/// A bf16 product widened to f32 and an f32 bias added to it, each the
/// only use of the value before it: the start of both mixed-precision
/// chains below.
struct WidenedBias {
  CastOp widen;
  Operation *biasOp = nullptr;
  Value bias;
};

std::optional<WidenedBias> findWidenedBias(MatmulOp matmul) {
  Operation *user = onlyUser(matmul.getResult());
  if (!matmul.getType().getElementType().isBF16() || !user)
    return std::nullopt;
  WidenedBias chain;
  chain.widen = dyn_cast<CastOp>(user);
  if (!chain.widen || !chain.widen.getType().getElementType().isF32())
    return std::nullopt;
  chain.biasOp = onlyUser(chain.widen.getResult());
  if (!chain.biasOp)
    return std::nullopt;
  chain.bias = biasAddedBy(chain.biasOp, chain.widen.getResult());
  if (!chain.bias)
    return std::nullopt;
  return chain;
}

/// Whether `value` has uses and every one is a cast to `narrowType` (the
/// rounding back to the GEMM's bf16); they are appended to `narrows`.
bool collectNarrowingUses(Value value, Type narrowType,
                          SmallVector<CastOp> &narrows) {
  for (Operation *user : value.getUsers()) {
    auto narrow = dyn_cast<CastOp>(user);
    if (!narrow || narrow.getType() != narrowType)
      return false;
    narrows.push_back(narrow);
  }
  return !narrows.empty();
}

/// A widened, biased bf16 product whose every use is a rounding back to
/// bf16.
struct NarrowedBiasAdd : WidenedBias {
  SmallVector<CastOp> narrows;
};

std::optional<NarrowedBiasAdd> findNarrowedBiasAdd(MatmulOp matmul) {
  std::optional<WidenedBias> start = findWidenedBias(matmul);
  if (!start)
    return std::nullopt;
  NarrowedBiasAdd chain{*start, {}};
  if (!collectNarrowingUses(chain.biasOp->getResult(0), matmul.getType(),
                            chain.narrows))
    return std::nullopt;
  return chain;
}

/// A widened, biased bf16 product under a tanh GELU whose every use is a
/// rounding back to bf16; the sum may have other uses (the GELU's
/// backward), which then read it rounded to bf16 and widened again, but
/// no other GELU (an exact one would then read a rounded input).
struct NarrowedGelu : WidenedBias {
  GeluOp gelu;
  SmallVector<CastOp> narrows;
};

std::optional<NarrowedGelu> findNarrowedGelu(MatmulOp matmul) {
  std::optional<WidenedBias> start = findWidenedBias(matmul);
  if (!start)
    return std::nullopt;
  NarrowedGelu chain{*start, {}, {}};
  for (Operation *user : chain.biasOp->getResult(0).getUsers()) {
    auto gelu = dyn_cast<GeluOp>(user);
    if (!gelu)
      continue;
    if (chain.gelu || gelu.getApproximate() != GeluApproximation::tanh)
      return std::nullopt; // two GELUs of one sum, or the exact one
    chain.gelu = gelu;
  }
  if (!chain.gelu)
    return std::nullopt;
  if (!collectNarrowingUses(chain.gelu.getResult(), matmul.getType(),
                            chain.narrows))
    return std::nullopt;
  return chain;
}

/// A widened, biased bf16 product plus another f32 tensor of the same type
/// (a residual), the sum's only use. The bias says that this is a linear
/// layer's forward: a widened product added to an f32 tensor without one
/// is a gradient being accumulated (or an optimizer's weight decay), whose
/// rounding to bf16 is torch.autocast's and stays.
struct WidenedResidual : WidenedBias {
  AddOp residualAdd;
  Value residual;
};

std::optional<WidenedResidual> findWidenedResidual(MatmulOp matmul) {
  std::optional<WidenedBias> start = findWidenedBias(matmul);
  if (!start)
    return std::nullopt;
  WidenedResidual chain{*start, {}, {}};
  Value sum = chain.biasOp->getResult(0);
  chain.residualAdd = dyn_cast_or_null<AddOp>(onlyUser(sum));
  if (!chain.residualAdd || chain.residualAdd.getType() != sum.getType() ||
      chain.residualAdd.getLhs() == chain.residualAdd.getRhs())
    return std::nullopt;
  chain.residual = chain.residualAdd.getLhs() == sum
                       ? chain.residualAdd.getRhs()
                       : chain.residualAdd.getLhs();
  if (chain.residual.getType() != sum.getType())
    return std::nullopt;
  return chain;
}

/// `loom.gelu_grad approximate tanh` of a GEMM's product, the product's
/// only use: in one type, or (mixed precision) a bf16 product widened to
/// f32 at a bf16 value widened too, every use of the gradient rounding it
/// back to bf16.
struct GeluGradOfProduct {
  GeluGradOp geluGrad;
  /// The GELU's input, of the product's type.
  Value input;
  /// The widenings of the product and of the input (mixed precision only).
  CastOp widen, inputWiden;
  SmallVector<CastOp> narrows;
};

std::optional<GeluGradOfProduct> findGeluGrad(MatmulOp matmul) {
  Value product = matmul.getResult();
  Operation *user = onlyUser(product);
  GeluGradOfProduct chain;
  if (auto widen = dyn_cast_or_null<CastOp>(user)) {
    if (!matmul.getType().getElementType().isBF16() ||
        !widen.getType().getElementType().isF32())
      return std::nullopt;
    chain.widen = widen;
    user = onlyUser(widen.getResult());
  }
  Value grad = chain.widen ? chain.widen.getResult() : product;
  chain.geluGrad = dyn_cast_or_null<GeluGradOp>(user);
  if (!chain.geluGrad || chain.geluGrad.getGrad() != grad ||
      chain.geluGrad.getApproximate() != GeluApproximation::tanh)
    return std::nullopt;
  chain.input = chain.geluGrad.getInput();
  if (!chain.widen)
    return chain.input.getType() == product.getType() ? std::optional(chain)
                                                      : std::nullopt;
  // The GELU's input must be a bf16 value widened (the forward's rounded
  // preactivation); rounding an f32 one here would change it.
  chain.inputWiden = chain.input.getDefiningOp<CastOp>();
  if (!chain.inputWiden ||
      chain.inputWiden.getInput().getType() != product.getType())
    return std::nullopt;
  chain.input = chain.inputWiden.getInput();
  if (!collectNarrowingUses(chain.geluGrad.getResult(), matmul.getType(),
                            chain.narrows))
    return std::nullopt;
  return chain;
}

/// At the gelu_grad, where the GELU's input is defined too.
void fuseGeluGrad(MatmulOp matmul, GeluGradOfProduct chain) {
  OpBuilder builder(chain.geluGrad);
  auto fused = builder.create<MatmulGeluGradOp>(
      builder.getFusedLoc({matmul.getLoc(), chain.geluGrad.getLoc()}),
      matmul.getType(), matmul.getLhs(), matmul.getRhs(), chain.input,
      matmul.getTransposeLhs(), matmul.getTransposeRhs());
  if (chain.widen) {
    for (CastOp narrow : chain.narrows) {
      narrow.getResult().replaceAllUsesWith(fused.getResult());
      narrow->erase();
    }
  } else {
    chain.geluGrad.getResult().replaceAllUsesWith(fused.getResult());
  }
  chain.geluGrad->erase();
  if (chain.widen) {
    chain.widen->erase();
    if (chain.inputWiden->use_empty())
      chain.inputWiden->erase();
  }
  matmul.erase();
}

/// At the residual add, where every operand is defined.
void fuseWidenedResidual(MatmulOp matmul, WidenedResidual chain) {
  OpBuilder builder(chain.residualAdd);
  Location loc = builder.getFusedLoc(
      {matmul.getLoc(), chain.biasOp->getLoc(), chain.residualAdd.getLoc()});
  auto fused = builder.create<FusedMatmulOp>(
      loc, TypeRange{chain.residualAdd.getType()}, matmul.getLhs(),
      matmul.getRhs(), chain.bias, chain.residual, matmul.getTransposeLhs(),
      matmul.getTransposeRhs(), MatmulActivation::none);
  chain.residualAdd.getResult().replaceAllUsesWith(fused.getResult());
  chain.residualAdd->erase();
  chain.biasOp->erase();
  chain.widen->erase();
  matmul.erase();
}

/// The f32 bias of `chain` rounded to bf16 (cuBLASLt's bias has D's type),
/// cast at the bias add. The bias is read again rather than taken from
/// the chain: an earlier rewrite may have replaced its producer.
Value bf16BiasOf(OpBuilder &builder, WidenedBias &chain) {
  Value f32Bias = biasAddedBy(chain.biasOp, chain.widen.getResult());
  auto biasType = cast<RankedTensorType>(f32Bias.getType());
  return builder.create<CastOp>(chain.biasOp->getLoc(),
                                biasType.clone(builder.getBF16Type()), f32Bias);
}

void fuseNarrowed(MatmulOp matmul, NarrowedBiasAdd chain) {
  OpBuilder builder(chain.biasOp);
  Value bias = bf16BiasOf(builder, chain);
  auto fused = builder.create<FusedMatmulOp>(
      builder.getFusedLoc({matmul.getLoc(), chain.biasOp->getLoc()}),
      TypeRange{matmul.getType()}, matmul.getLhs(), matmul.getRhs(), bias,
      /*addend=*/Value(), matmul.getTransposeLhs(), matmul.getTransposeRhs(),
      MatmulActivation::none);
  for (CastOp narrow : chain.narrows) {
    narrow.getResult().replaceAllUsesWith(fused.getResult());
    narrow->erase();
  }
  chain.biasOp->erase();
  chain.widen->erase();
  matmul.erase();
}

void fuseNarrowedGelu(MatmulOp matmul, NarrowedGelu chain) {
  OpBuilder builder(chain.biasOp);
  Value sum = chain.biasOp->getResult(0);
  const bool keepPreactivation = !sum.hasOneUse();
  Value bias = bf16BiasOf(builder, chain);
  SmallVector<Type, 2> resultTypes{matmul.getType()};
  if (keepPreactivation)
    resultTypes.push_back(matmul.getType());
  auto fused = builder.create<FusedMatmulOp>(
      builder.getFusedLoc(
          {matmul.getLoc(), chain.biasOp->getLoc(), chain.gelu.getLoc()}),
      resultTypes, matmul.getLhs(), matmul.getRhs(), bias,
      /*addend=*/Value(), matmul.getTransposeLhs(), matmul.getTransposeRhs(),
      MatmulActivation::gelu_tanh);
  for (CastOp narrow : chain.narrows) {
    narrow.getResult().replaceAllUsesWith(fused.getResult());
    narrow->erase();
  }
  chain.gelu->erase();
  if (keepPreactivation) {
    Value widened = builder.create<CastOp>(
        chain.biasOp->getLoc(), sum.getType(), fused.getPreactivation());
    sum.replaceAllUsesWith(widened);
  }
  chain.biasOp->erase();
  chain.widen->erase();
  matmul.erase();
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
      /*addend=*/Value(), matmul.getTransposeLhs(), matmul.getTransposeRhs(),
      epilogue.activation);
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
    SmallVector<std::pair<MatmulOp, NarrowedBiasAdd>> narrowed;
    SmallVector<std::pair<MatmulOp, NarrowedGelu>> gelus;
    SmallVector<MatmulOp> residuals;
    getOperation().walk([&](MatmulOp matmul) {
      if (std::optional<Epilogue> epilogue = findEpilogue(matmul))
        rewrites.emplace_back(matmul, *epilogue);
      else if (std::optional<NarrowedBiasAdd> chain =
                   findNarrowedBiasAdd(matmul))
        narrowed.emplace_back(matmul, std::move(*chain));
      else if (std::optional<NarrowedGelu> chain = findNarrowedGelu(matmul))
        gelus.emplace_back(matmul, std::move(*chain));
      else if (findWidenedResidual(matmul))
        residuals.push_back(matmul);
    });
    for (auto &[matmul, epilogue] : rewrites)
      fuse(matmul, epilogue);
    for (auto &[matmul, chain] : narrowed)
      fuseNarrowed(matmul, chain);
    for (auto &[matmul, chain] : gelus)
      fuseNarrowedGelu(matmul, chain);
    // One residual's sum is the next one's residual (x + attn, then + mlp),
    // which the first fusion replaces: each chain is found again when it is
    // fused.
    for (MatmulOp matmul : residuals)
      if (std::optional<WidenedResidual> chain = findWidenedResidual(matmul))
        fuseWidenedResidual(matmul, *chain);
    // After the forward rewrites: in bf16 the GELU's backward reads the
    // preactivation they return. One chain's GELU input may be another's
    // result, which fusing that one replaces: each is found again when it
    // is fused.
    SmallVector<MatmulOp> geluGrads;
    getOperation().walk([&](MatmulOp matmul) {
      if (findGeluGrad(matmul))
        geluGrads.push_back(matmul);
    });
    for (MatmulOp matmul : geluGrads)
      if (std::optional<GeluGradOfProduct> chain = findGeluGrad(matmul))
        fuseGeluGrad(matmul, *chain);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
