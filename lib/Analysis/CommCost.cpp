//===- CommCost.cpp - What a loom collective sends ------------------------===//

#include "loom/Analysis/CommCost.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::loom;
using loomcost::CollectiveKind;

/// Bytes of a statically shaped tensor (bytes rounded up per element, as
/// the plan stores them); nothing for anything else.
static std::optional<uint64_t> tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return std::nullopt;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return uint64_t(tensor.getNumElements()) * uint64_t((bits + 7) / 8);
}

/// The size of the first group (the verifiers make every group the same
/// size).
static int64_t groupSizeOf(ArrayAttr groups) {
  if (!groups || groups.empty())
    return 1;
  return cast<DenseI64ArrayAttr>(groups[0]).size();
}

std::optional<CollectiveCost>
mlir::loom::estimateCollectiveCost(Operation *op,
                                   const loomcost::LinkModel &link) {
  CollectiveCost cost;
  Type buffer;
  if (auto reduce = dyn_cast<AllReduceOp>(op)) {
    cost.kind = CollectiveKind::AllReduce;
    cost.groupSize = groupSizeOf(reduce.getGroups());
    buffer = reduce.getInput().getType();
  } else if (auto gather = dyn_cast<AllGatherOp>(op)) {
    cost.kind = CollectiveKind::AllGather;
    cost.groupSize = groupSizeOf(gather.getGroups());
    buffer = gather.getResult().getType();
  } else if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
    cost.kind = CollectiveKind::ReduceScatter;
    cost.groupSize = groupSizeOf(scatter.getGroups());
    buffer = scatter.getInput().getType();
  } else if (auto exchange = dyn_cast<AllToAllOp>(op)) {
    cost.kind = CollectiveKind::AllToAll;
    cost.groupSize = groupSizeOf(exchange.getGroups());
    buffer = exchange.getInput().getType();
  } else if (auto broadcast = dyn_cast<CollectiveBroadcastOp>(op)) {
    cost.kind = CollectiveKind::Broadcast;
    cost.groupSize = groupSizeOf(broadcast.getGroups());
    buffer = broadcast.getInput().getType();
  } else if (auto send = dyn_cast<SendOp>(op)) {
    cost.kind = CollectiveKind::Send;
    cost.groupSize = 2;
    buffer = send.getInput().getType();
  } else if (auto recv = dyn_cast<RecvOp>(op)) {
    cost.kind = CollectiveKind::Recv;
    cost.groupSize = 2;
    buffer = recv.getResult().getType();
  } else {
    return std::nullopt;
  }
  std::optional<uint64_t> bytes = tensorBytes(buffer);
  if (!bytes)
    return std::nullopt;
  cost.fullBytes = *bytes;
  cost.bytesSent = loomcost::ringBytesSent(cost.kind, *bytes, cost.groupSize);
  cost.seconds = link.seconds(cost.kind, *bytes, cost.groupSize);
  return cost;
}
