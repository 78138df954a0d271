//===- FuseAttention.cpp - The attention pattern into loom.attention ------===//
//
// Exported transformers spell attention out as matmul, scale, mask select,
// softmax and matmul. Run as such, every step reads and writes a
// [..., Sq, Sk] tensor (at GPT-2 size, 400 MB per layer in f32), which is
// most of a training step's memory traffic. The match starts at each
// softmax over the last dimension, walks up to the scores' matmul and down
// to the product with v; it gives up, leaving the graph alone, at the first
// step that is not one of the expected forms or has another user. When q,
// k and v are head transposes of [..., S, H, D] values and the output's
// only use transposes it back, the attention is made seq_major instead.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <optional>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEATTENTION
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// The value of a splat float constant, if `value` is one.
std::optional<double> splatValue(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// The pieces of one matched attention.
struct Match {
  MatmulOp scores, output;
  SoftmaxOp softmax;
  /// Ops between the two matmuls, erased after the rewrite.
  SmallVector<Operation *> chain;
  double scale = 1.0;
  Value mask;
  bool negateMask = false;
  double maskValue = 0.0;
  /// An additive mask: a constant of zeros and one fill far below any
  /// score (HF's causal mask of finfo.min), true where it holds the fill.
  DenseElementsAttr additiveMask;
  /// A clamp of the scores from below (HF LLaMA's `max(scores,
  /// finfo.min)`): the identity on finite scores, it clamps the fill.
  std::optional<double> clamp;
};

/// The fill of an additive mask: `attr`'s one nonzero value, when every
/// element is 0 or that value and it is so far below any score that
/// adding it gives the fill itself (-inf, or at most -1e30: a score below
/// 1e21 is less than half its ulp).
std::optional<double> scanAdditiveFill(DenseElementsAttr attr) {
  if (!attr || attr.isSplat() || !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  std::optional<double> fill;
  for (APFloat element : attr.getValues<APFloat>()) {
    if (element.isZero())
      continue;
    double value = element.convertToDouble();
    if (fill && *fill != value)
      return std::nullopt;
    fill = value;
  }
  if (!fill || !(*fill <= -1e30))
    return std::nullopt;
  return fill;
}

/// Every layer adds the same causal mask (S x S elements): each constant is
/// read once, and its i1 form made once.
struct AdditiveMasks {
  llvm::DenseMap<Attribute, std::optional<double>> fills;
  llvm::DenseMap<Attribute, DenseElementsAttr> masks;

  std::optional<double> fill(DenseElementsAttr attr) {
    auto [it, inserted] = fills.try_emplace(attr);
    if (inserted)
      it->second = scanAdditiveFill(attr);
    return it->second;
  }

  /// True where `attr` holds its fill.
  DenseElementsAttr mask(DenseElementsAttr attr) {
    DenseElementsAttr &mask = masks[attr];
    if (!mask) {
      SmallVector<bool> masked;
      for (APFloat element : attr.getValues<APFloat>())
        masked.push_back(!element.isZero());
      auto type = cast<RankedTensorType>(attr.getType())
                      .clone(IntegerType::get(attr.getContext(), 1));
      mask = DenseElementsAttr::get(type, ArrayRef<bool>(masked));
    }
    return mask;
  }
};

/// Walks from the softmax's input up to the scores' matmul: at most one
/// scale, at most one select and at most one widening cast (the latter
/// only directly below the matmul).
LogicalResult matchScores(SoftmaxOp softmax, Match &match,
                          AdditiveMasks &additive) {
  Value value = softmax.getInput();
  bool scaled = false;
  while (true) {
    Operation *def = value.getDefiningOp();
    if (!def || !value.hasOneUse())
      return failure();
    if (auto matmul = dyn_cast<MatmulOp>(def)) {
      match.scores = matmul;
      return success();
    }
    bool first = match.chain.empty();
    match.chain.push_back(def);
    // Right below the softmax, a clamp from below at the lowest finite
    // value (or -inf): nothing a finite score is changed by.
    if (auto maximum = dyn_cast<MaximumOp>(def); maximum && first) {
      Value lhs = maximum.getLhs(), rhs = maximum.getRhs();
      std::optional<double> c = splatValue(rhs);
      Value scores = lhs;
      if (!c) {
        c = splatValue(lhs);
        scores = rhs;
      }
      auto element = cast<FloatType>(
          cast<RankedTensorType>(maximum.getType()).getElementType());
      double lowest =
          APFloat::getLargest(element.getFloatSemantics(), /*Negative=*/true)
              .convertToDouble();
      if (!c || scores.getType() != maximum.getType() ||
          !(*c == lowest || (std::isinf(*c) && *c < 0)))
        return failure();
      match.clamp = *c;
      value = scores;
      continue;
    }
    // An additive mask of zeros and a huge negative fill: where it holds
    // the fill, the sum is the fill, as a select would make it.
    if (auto add = dyn_cast<AddOp>(def);
        add && !match.mask && !match.additiveMask) {
      DenseElementsAttr attr;
      Value scores = add.getLhs();
      if (!matchPattern(add.getRhs(), m_Constant(&attr))) {
        scores = add.getRhs();
        if (!matchPattern(add.getLhs(), m_Constant(&attr)))
          return failure();
      }
      std::optional<double> fill = additive.fill(attr);
      if (!fill || scores.getType() != add.getType())
        return failure();
      match.additiveMask = attr;
      match.maskValue = scaled ? *fill * match.scale : *fill;
      value = scores;
      continue;
    }
    if (auto cast = dyn_cast<CastOp>(def)) {
      auto producer = cast.getInput().getDefiningOp<MatmulOp>();
      if (!producer)
        return failure();
      value = cast.getInput();
      continue;
    }
    if (isa<MulOp, DivOp>(def) && !scaled) {
      Value lhs = def->getOperand(0), rhs = def->getOperand(1);
      std::optional<double> c = splatValue(rhs);
      Value scores = lhs;
      if (!c && isa<MulOp>(def)) {
        c = splatValue(lhs);
        scores = rhs;
      }
      if (!c || scores.getType() != def->getResult(0).getType() || *c == 0.0)
        return failure();
      match.scale = isa<DivOp>(def) ? 1.0 / *c : *c;
      scaled = true;
      value = scores;
      continue;
    }
    if (auto select = dyn_cast<SelectOp>(def);
        select && !match.mask && !match.additiveMask) {
      std::optional<double> onTrue = splatValue(select.getOnTrue());
      std::optional<double> onFalse = splatValue(select.getOnFalse());
      Value scores;
      if (onTrue && !onFalse) {
        match.maskValue = *onTrue;
        scores = select.getOnFalse();
      } else if (onFalse && !onTrue) {
        match.maskValue = *onFalse;
        match.negateMask = true;
        scores = select.getOnTrue();
      } else {
        return failure();
      }
      if (scores.getType() != select.getType())
        return failure();
      // Walking upwards, a scale already seen applies to the filled value
      // as well.
      if (scaled)
        match.maskValue *= match.scale;
      match.mask = select.getCondition();
      value = scores;
      continue;
    }
    return failure();
  }
}

/// Matches the attention around `softmax`.
FailureOr<Match> matchAttention(SoftmaxOp softmax, AdditiveMasks &additive) {
  auto type = cast<RankedTensorType>(softmax.getType());
  int64_t rank = type.getRank();
  int64_t axis = softmax.getAxis();
  if (rank < 2 || (axis != rank - 1 && axis != -1))
    return failure();
  Match match;
  match.softmax = softmax;
  if (failed(matchScores(softmax, match, additive)))
    return failure();
  if (match.clamp && (match.mask || match.additiveMask))
    match.maskValue = std::max(match.maskValue, *match.clamp);

  // Down: an optional narrowing cast, then the product with v.
  Value probs = softmax.getResult();
  if (!probs.hasOneUse())
    return failure();
  Operation *user = *probs.getUsers().begin();
  if (auto cast = dyn_cast<CastOp>(user)) {
    if (!cast.getResult().hasOneUse())
      return failure();
    match.chain.push_back(cast);
    probs = cast.getResult();
    user = *probs.getUsers().begin();
  }
  auto output = dyn_cast<MatmulOp>(user);
  if (!output || output.getLhs() != probs || output.getRhs() == probs ||
      output.getTransposeLhs())
    return failure();
  match.output = output;

  // One element type for q, k, v and both products; the same batch
  // dimensions for all three (matmul's rank-2 broadcasting is not fused).
  auto q = cast<RankedTensorType>(match.scores.getLhs().getType());
  auto k = cast<RankedTensorType>(match.scores.getRhs().getType());
  auto v = cast<RankedTensorType>(output.getRhs().getType());
  Type element = q.getElementType();
  if (output.getType().getElementType() != element ||
      cast<RankedTensorType>(probs.getType()).getElementType() != element)
    return failure();
  if (q.getRank() != rank || k.getRank() != rank || v.getRank() != rank ||
      q.getShape().drop_back(2) != k.getShape().drop_back(2) ||
      q.getShape().drop_back(2) != v.getShape().drop_back(2))
    return failure();
  if (match.mask || match.additiveMask) {
    auto maskType = match.mask
                        ? cast<RankedTensorType>(match.mask.getType())
                        : cast<RankedTensorType>(match.additiveMask.getType());
    if (maskType.getRank() > rank)
      return failure();
  }
  return match;
}

/// Swaps the two trailing dimensions of `value`.
Value transposeTrailing(OpBuilder &builder, Location loc, Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[rank - 2], permutation[rank - 1]);
  return builder.create<TransposeOp>(loc, value, permutation);
}

/// The mask in the form loom.attention takes: true where masked out, the
/// rank of the scores, its last two dimensions [Sq, Sk].
Value normalizeMask(OpBuilder &builder, Location loc, Match &match,
                    RankedTensorType scores) {
  Value mask = match.mask;
  auto type = cast<RankedTensorType>(mask.getType());
  int64_t rank = scores.getRank();
  if (type.getRank() < rank) {
    SmallVector<int64_t> shape(rank - type.getRank(), 1);
    llvm::append_range(shape, type.getShape());
    type = type.clone(shape);
    mask = builder.create<ReshapeOp>(loc, type, mask);
  }
  SmallVector<int64_t> shape(type.getShape());
  shape[rank - 2] = scores.getDimSize(rank - 2);
  shape[rank - 1] = scores.getDimSize(rank - 1);
  if (ArrayRef<int64_t>(shape) != type.getShape()) {
    type = type.clone(shape);
    mask = builder.create<BroadcastOp>(loc, type, mask);
  }
  if (match.negateMask) {
    auto scalar = RankedTensorType::get({}, builder.getI1Type());
    Value no = builder.create<ConstantOp>(
        loc, DenseElementsAttr::get(scalar, builder.getBoolAttr(false)));
    mask = builder.create<CompareOp>(loc, CompareDirection::eq, mask, no);
  }
  return mask;
}

/// Whether `permutation` swaps dimensions rank-3 and rank-2 (sequence and
/// heads) and keeps the others.
bool isHeadSwap(ArrayRef<int64_t> permutation) {
  int64_t rank = permutation.size();
  if (rank < 3)
    return false;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t expected = i == rank - 3 ? rank - 2 : i == rank - 2 ? rank - 3 : i;
    if (permutation[i] != expected)
      return false;
  }
  return true;
}

/// The seq-major `[..., S, H, D]` value that `value` (`[..., H, S, D]`) is
/// a head transpose of: the first value up its chain of transposes that
/// the chain as a whole swaps sequence and heads of.
Value seqMajorSource(Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  // Dimension i of `value` is dimension composite[i] of `current`.
  SmallVector<int64_t> composite = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  Value current = value;
  while (auto transpose = current.getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> step = transpose.getPermutation();
    for (int64_t &d : composite)
      d = step[d];
    current = transpose.getInput();
    if (isHeadSwap(composite))
      return current;
  }
  return {};
}

/// The only user of `output` when it is a head transpose.
TransposeOp headTransposeUser(Value output) {
  if (!output.hasOneUse())
    return {};
  auto transpose = dyn_cast<TransposeOp>(*output.getUsers().begin());
  if (!transpose || !isHeadSwap(transpose.getPermutation()))
    return {};
  return transpose;
}

/// Erases the transposes above `operands` that nothing reads any more. The
/// chains may share ops (k's may run through v's head transpose), so they
/// are collected first and erased users before producers until none is
/// left unread.
void eraseDeadTransposes(ArrayRef<Value> operands) {
  llvm::SetVector<Operation *> chain;
  for (Value value : operands)
    while (auto transpose = value.getDefiningOp<TransposeOp>()) {
      chain.insert(transpose);
      value = transpose.getInput();
    }
  SmallVector<Operation *> ops(chain.begin(), chain.end());
  bool erased = true;
  while (erased) {
    erased = false;
    for (Operation *&op : ops)
      if (op && op->use_empty()) {
        op->erase();
        op = nullptr;
        erased = true;
      }
  }
}

void rewrite(Match &match, AdditiveMasks &additive) {
  OpBuilder builder(match.output);
  Location loc = builder.getFusedLoc(
      {match.scores.getLoc(), match.softmax.getLoc(), match.output.getLoc()});
  Value q = match.scores.getLhs(), k = match.scores.getRhs();
  Value v = match.output.getRhs();
  if (match.scores.getTransposeLhs())
    q = transposeTrailing(builder, loc, q);
  if (!match.scores.getTransposeRhs())
    k = transposeTrailing(builder, loc, k);
  if (match.output.getTransposeRhs())
    v = transposeTrailing(builder, loc, v);
  if (match.additiveMask) {
    // The additive mask as loom.attention takes masks: true where the
    // fill is.
    match.mask =
        builder.create<ConstantOp>(loc, additive.mask(match.additiveMask));
  }
  Value mask;
  if (match.mask)
    mask = normalizeMask(builder, loc, match, match.scores.getType());
  // Models split heads out of a projection ([B, S, H*D] -> [B, S, H, D] ->
  // transpose) and merge them back the same way. Taken seq-major, the
  // attention reads and writes the projections' layout and the four
  // transposes (and their backward copies) go.
  Value qSource = seqMajorSource(q), kSource = seqMajorSource(k),
        vSource = seqMajorSource(v);
  TransposeOp merge = headTransposeUser(match.output.getResult());
  bool seqMajor = qSource && kSource && vSource && merge;
  auto attention = builder.create<AttentionOp>(
      loc, seqMajor ? qSource : q, seqMajor ? kSource : k,
      seqMajor ? vSource : v, mask, builder.getF64FloatAttr(match.scale),
      builder.getF64FloatAttr(match.mask
                                  ? match.maskValue
                                  : -std::numeric_limits<double>::infinity()),
      seqMajor ? builder.getUnitAttr() : UnitAttr());
  if (seqMajor) {
    merge.getResult().replaceAllUsesWith(attention.getOutput());
    merge.erase();
  } else {
    match.output.getResult().replaceAllUsesWith(attention.getOutput());
  }
  match.output.erase();
  // Users first: the chain was collected from the softmax upwards, then the
  // cast below it.
  SmallVector<Operation *> dead = {match.softmax};
  for (Operation *op : match.chain)
    if (isa<CastOp>(op) && op->getOperand(0) == match.softmax.getResult())
      dead.insert(dead.begin(), op);
    else
      dead.push_back(op);
  dead.push_back(match.scores);
  for (Operation *op : dead)
    op->erase();
  if (seqMajor)
    eraseDeadTransposes({q, k, v});
}

struct FuseAttentionPass : impl::LoomFuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<Match> matches;
    AdditiveMasks additive;
    getOperation().walk([&](SoftmaxOp softmax) {
      if (FailureOr<Match> match = matchAttention(softmax, additive);
          succeeded(match))
        matches.push_back(*match);
    });
    for (Match &match : matches)
      rewrite(match, additive);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
