//===- TrainingOps.cpp - Parameter updates and optimizers -----------------===//
//
// Verifiers of loom.assign, loom.sgd_update and loom.adamw_update. The
// optimizer ops carry torch's hyper-parameter rules, so that a bad setting is
// rejected where it is written rather than producing a silently different run.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::loom;

//===----------------------------------------------------------------------===//
// AssignOp
//===----------------------------------------------------------------------===//

LogicalResult AssignOp::verify() {
  // A second store would make the parameter's next value depend on the
  // order of the stores. The block's first loom.assign checks the whole
  // block; each later one only walks back to the assign before it. So a
  // verification walks a block once, however many assigns it holds (a
  // training step has one per parameter and state: a 96-layer GPT's
  // thousands of assigns each walking back over tens of thousands of ops
  // made every verification take seconds).
  for (Operation *op = (*this)->getPrevNode(); op; op = op->getPrevNode())
    if (isa<AssignOp>(op))
      return success();
  llvm::SmallDenseSet<Attribute, 64> assigned;
  for (Operation *op = getOperation(); op; op = op->getNextNode())
    if (auto other = dyn_cast<AssignOp>(op);
        other && !assigned.insert(other.getNameAttr()).second)
      return other.emitOpError() << "assigns " << other.getNameAttr()
                                 << " a second time in the same block";
  return success();
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto parameter = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
      getOperation(), getNameAttr());
  if (!parameter)
    return emitOpError() << "assigns " << getNameAttr()
                         << ", which is not a loom.parameter";
  // The whole parameter, or where it has a sharding, this rank's shard of
  // it (a partitioned function's local type).
  Type type = getValue().getType();
  if (parameter.getType() == type)
    return success();
  std::optional<ShardingAttr> sharding = parameter.getSharding();
  RankedTensorType shard =
      sharding ? getShardType(parameter, parameter.getTensorType(), *sharding,
                              symbolTable)
               : RankedTensorType();
  if (shard && shard == type)
    return success();
  InFlightDiagnostic diag = emitOpError() << "assigns a " << type
                                          << " to parameter " << getNameAttr()
                                          << " of type " << parameter.getType();
  if (shard)
    diag << " (a shard of it " << shard << ")";
  return diag;
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// Checks what every update shares: grad, states and results have the
/// parameter's type, and there are `stateCount` states.
static LogicalResult verifyUpdate(Operation *op, Value param, Value grad,
                                  ValueRange states, ResultRange results,
                                  size_t stateCount, StringRef stateNames) {
  Type type = param.getType();
  if (grad.getType() != type)
    return op->emitOpError() << "has gradient type " << grad.getType()
                             << " but parameter type " << type;
  if (states.size() != stateCount)
    return op->emitOpError()
           << "takes " << stateCount << " state operand(s) (" << stateNames
           << ") with these hyper-parameters, got " << states.size();
  for (Value state : states)
    if (state.getType() != type)
      return op->emitOpError() << "has state of type " << state.getType()
                               << " but parameter type " << type;
  for (Value result : results)
    if (result.getType() != type)
      return op->emitOpError() << "returns " << result.getType()
                               << " but the parameter is " << type;
  if (results.size() != 1 + stateCount)
    return op->emitOpError() << "returns " << results.size()
                             << " values; expected the parameter and "
                             << stateCount << " state(s)";
  return success();
}

LogicalResult SGDUpdateOp::verify() {
  double lr = getLr().convertToDouble(),
         momentum = getMomentum().convertToDouble(),
         dampening = getDampening().convertToDouble(),
         weightDecay = getWeightDecay().convertToDouble();
  if (!(lr >= 0))
    return emitOpError() << "lr " << lr << " must be >= 0";
  if (!(momentum >= 0))
    return emitOpError() << "momentum " << momentum << " must be >= 0";
  if (!(weightDecay >= 0))
    return emitOpError() << "weight_decay " << weightDecay << " must be >= 0";
  if (getNesterov() && (momentum <= 0 || dampening != 0))
    return emitOpError("nesterov needs a momentum and zero dampening");
  return verifyUpdate(*this, getParam(), getGrad(), getStates(), getResults(),
                      momentum != 0 ? 1 : 0, "the momentum buffer");
}

LogicalResult AdamWUpdateOp::verify() {
  double lr = getLr().convertToDouble(), beta1 = getBeta1().convertToDouble(),
         beta2 = getBeta2().convertToDouble(), eps = getEps().convertToDouble(),
         weightDecay = getWeightDecay().convertToDouble();
  if (!(lr >= 0))
    return emitOpError() << "lr " << lr << " must be >= 0";
  if (!(eps >= 0))
    return emitOpError() << "eps " << eps << " must be >= 0";
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return emitOpError() << "betas (" << beta1 << ", " << beta2
                         << ") must lie in [0, 1)";
  if (!(weightDecay >= 0))
    return emitOpError() << "weight_decay " << weightDecay << " must be >= 0";
  return verifyUpdate(*this, getParam(), getGrad(), getStates(), getResults(),
                      2, "the first and second moments");
}
