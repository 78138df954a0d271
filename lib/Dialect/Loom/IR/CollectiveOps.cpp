//===- CollectiveOps.cpp - Communication between ranks --------------------===//
//
// Verifiers of the collectives and send/recv. Rank lists are checked against
// the module's world size and against the ranks that run the function: a
// rank that runs the op but is in none of its groups could not run it.
// Whether the other members of its group issue the same collective (in
// another function) is checked on the whole plan (checkCommunication).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The world ranks that run `op`: those of its function.
SmallVector<int64_t> ranksRunning(Operation *op) {
  if (auto func = op->getParentOfType<FunctionOpInterface>())
    return LoomDialect::getRanksOf(func);
  return llvm::to_vector(llvm::seq<int64_t>(0, LoomDialect::getWorldSize(op)));
}

/// Groups: sorted, disjoint lists of world ranks of one size, covering
/// every rank that runs `op`. Returns the group size.
FailureOr<int64_t> verifyGroups(Operation *op, ArrayAttr groups) {
  if (groups.empty())
    return op->emitOpError("needs at least one group");
  int64_t worldSize = LoomDialect::getWorldSize(op);
  int64_t size = -1;
  llvm::DenseSet<int64_t> seen;
  for (Attribute attr : groups) {
    ArrayRef<int64_t> group = cast<DenseI64ArrayAttr>(attr).asArrayRef();
    if (size >= 0 && int64_t(group.size()) != size)
      return op->emitOpError("groups must all have the same size, got ")
             << size << " and " << group.size();
    size = group.size();
    if (group.empty())
      return op->emitOpError("has an empty group");
    for (auto [index, rank] : llvm::enumerate(group)) {
      if (rank < 0 || rank >= worldSize)
        return op->emitOpError("names rank ")
               << rank << ", outside the world of " << worldSize
               << " rank(s) (the module's loom.world_size)";
      if (index && rank <= group[index - 1])
        return op->emitOpError("groups must list ranks in increasing order");
      if (!seen.insert(rank).second)
        return op->emitOpError("puts rank ") << rank << " in two groups";
    }
  }
  // A group may hold ranks that run other functions (MPMD stages that
  // reduce together); that they issue the same collective is checked on the
  // whole plan, when it is written.
  for (int64_t rank : ranksRunning(op))
    if (!seen.contains(rank))
      return op->emitOpError("runs on rank ")
             << rank << ", which is in none of its groups";
  return size;
}

LogicalResult verifyReduction(Operation *op, CollectiveReduction reduction,
                              Type type) {
  if (reduction == CollectiveReduction::avg &&
      !isa<FloatType>(cast<ShapedType>(type).getElementType()))
    return op->emitOpError("averages only floats");
  return success();
}

/// The result of gathering along `axis` (or the piece of a scatter), checked
/// against the op's result type.
LogicalResult verifyScaledAxis(Operation *op, RankedTensorType input,
                               RankedTensorType result, int64_t axis,
                               int64_t groupSize, bool gather) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError("result element type ")
           << result.getElementType() << " differs from the input's "
           << input.getElementType();
  if (axis < 0 || axis >= input.getRank())
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << input.getRank();
  SmallVector<int64_t> expected(input.getShape());
  if (gather) {
    expected[axis] *= groupSize;
  } else {
    if (expected[axis] % groupSize != 0)
      return op->emitOpError("dim ")
             << axis << " (" << expected[axis]
             << ") does not split evenly over groups of " << groupSize;
    expected[axis] /= groupSize;
  }
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("result must be ")
           << RankedTensorType::get(expected, input.getElementType())
           << " for groups of " << groupSize << ", got " << result;
  return success();
}

/// Pairs: [source, target] of distinct world ranks; each rank that runs the
/// op is the source (send) or the target (recv) of exactly one.
LogicalResult verifyPairs(Operation *op, ArrayAttr pairs, bool sending,
                          int64_t tag) {
  if (tag < 0 || tag > INT32_MAX)
    return op->emitOpError("tag ") << tag << " must be in [0, 2^31)";
  if (pairs.empty())
    return op->emitOpError("needs at least one [source, target] pair");
  int64_t worldSize = LoomDialect::getWorldSize(op);
  llvm::DenseSet<int64_t> sources, targets;
  for (Attribute attr : pairs) {
    ArrayRef<int64_t> pair = cast<DenseI64ArrayAttr>(attr).asArrayRef();
    if (pair.size() != 2 || pair[0] == pair[1])
      return op->emitOpError(
          "pairs must be [source, target] of two different ranks");
    for (int64_t rank : pair)
      if (rank < 0 || rank >= worldSize)
        return op->emitOpError("names rank ")
               << rank << ", outside the world of " << worldSize
               << " rank(s) (the module's loom.world_size)";
    if (!sources.insert(pair[0]).second)
      return op->emitOpError("rank ") << pair[0] << " sends twice";
    if (!targets.insert(pair[1]).second)
      return op->emitOpError("rank ") << pair[1] << " receives twice";
  }
  const llvm::DenseSet<int64_t> &mine = sending ? sources : targets;
  for (int64_t rank : ranksRunning(op))
    if (!mine.contains(rank))
      return op->emitOpError("runs on rank ")
             << rank << ", which is the " << (sending ? "source" : "target")
             << " of none of its pairs";
  return success();
}

/// Whether splitting `type` along `axis` cuts it into contiguous blocks.
bool splitsIntoBlocks(RankedTensorType type, int64_t axis) {
  return llvm::all_of(type.getShape().take_front(axis),
                      [](int64_t dim) { return dim == 1; });
}

} // namespace

bool AllGatherOp::movesWholeBlocks() {
  return splitsIntoBlocks(getResult().getType(), getAxis());
}

bool ReduceScatterOp::movesWholeBlocks() {
  return splitsIntoBlocks(getInput().getType(), getAxis());
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyGroups(*this, getGroups())))
    return failure();
  return verifyReduction(*this, getReduction(), getInput().getType());
}

LogicalResult AllGatherOp::verify() {
  FailureOr<int64_t> size = verifyGroups(*this, getGroups());
  if (failed(size))
    return failure();
  return verifyScaledAxis(*this, getInput().getType(), getResult().getType(),
                          getAxis(), *size, /*gather=*/true);
}

LogicalResult ReduceScatterOp::verify() {
  FailureOr<int64_t> size = verifyGroups(*this, getGroups());
  if (failed(size) ||
      failed(verifyReduction(*this, getReduction(), getInput().getType())))
    return failure();
  return verifyScaledAxis(*this, getInput().getType(), getResult().getType(),
                          getAxis(), *size, /*gather=*/false);
}

LogicalResult CollectiveBroadcastOp::verify() {
  FailureOr<int64_t> size = verifyGroups(*this, getGroups());
  if (failed(size))
    return failure();
  // I64Attr reads back unsigned; a negative root is a huge one.
  int64_t root = int64_t(getRoot());
  if (root < 0 || root >= *size)
    return emitOpError("root ")
           << root << " is not a group rank (groups of " << *size << ")";
  return success();
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> size = verifyGroups(*this, getGroups());
  if (failed(size))
    return failure();
  RankedTensorType type = getInput().getType();
  if (type.getRank() == 0 || type.getDimSize(0) % *size != 0)
    return emitOpError("dim 0 must split evenly over groups of ") << *size;
  return success();
}

LogicalResult SendOp::verify() {
  return verifyPairs(*this, getPairs(), /*sending=*/true, getTag());
}

LogicalResult RecvOp::verify() {
  return verifyPairs(*this, getPairs(), /*sending=*/false, getTag());
}
