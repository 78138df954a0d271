//===- ExplainSharding.cpp - Where each collective comes from, and its cost
//===//
//
// Reads what loom-partition recorded on each collective it inserted
// (`loom.resharding = {type, from, to, origin}`) and prices it with the
// link model of lib/Analysis (LinkModel.h, CommCost.h). Changes nothing.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/CommCost.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMEXPLAINSHARDING
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

using loomcost::CollectiveKind;

/// "'node'" for a name location (an ONNX node), "file:line:col" for a
/// source location, the first of a fused location that says something.
std::string describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return ("'" + name.getName().getValue() + "'").str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      if (isa<NameLoc>(inner))
        return describeLocation(inner);
    for (Location inner : fused.getLocations()) {
      std::string text = describeLocation(inner);
      if (text != "an unknown location")
        return text;
    }
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callSite.getCallee());
  return "an unknown location";
}

/// `[{tp}, {}] partial<sum> {tp}`: a sharding without its mesh.
std::string formatSharding(ShardingAttr sharding) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  for (unsigned dim = 0; dim < sharding.getRank(); ++dim) {
    if (dim)
      os << ", ";
    SmallVector<StringRef> axes = sharding.getDimAxes(dim);
    os << "{" << llvm::join(axes, ", ");
    if (sharding.isDimOpen(dim))
      os << (axes.empty() ? "?" : ", ?");
    os << "}";
  }
  os << "]";
  if (sharding.getPartialKind() != PartialKind::none)
    os << " partial<" << stringifyPartialKind(sharding.getPartialKind())
       << "> {" << llvm::join(sharding.getPartialAxesNames(), ", ") << "}";
  return text;
}

std::string formatType(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// What a collective does besides moving bytes: its reduction, axis, root.
std::string detailOf(Operation *op) {
  if (auto reduce = dyn_cast<AllReduceOp>(op))
    return (" " + stringifyCollectiveReduction(reduce.getReduction())).str();
  if (auto gather = dyn_cast<AllGatherOp>(op))
    return (" along dim " + Twine(gather.getAxis())).str();
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return (" " + stringifyCollectiveReduction(scatter.getReduction()) +
            " along dim " + Twine(scatter.getAxis()))
        .str();
  if (auto broadcast = dyn_cast<CollectiveBroadcastOp>(op))
    return (" from group rank " + Twine(broadcast.getRoot())).str();
  return "";
}

/// The share of S the kind sends, as the report spells it.
const char *shareOf(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "2(n-1)/n";
  case CollectiveKind::Send:
    return "all";
  case CollectiveKind::Recv:
    return "none";
  default:
    return "(n-1)/n";
  }
}

struct Total {
  int64_t ops = 0;
  uint64_t bytes = 0;
  double seconds = 0;

  void add(const CollectiveCost &cost) {
    ++ops;
    bytes += cost.bytesSent;
    seconds += cost.seconds;
  }
};

struct ExplainShardingPass
    : impl::LoomExplainShardingBase<ExplainShardingPass> {
  using LoomExplainShardingBase::LoomExplainShardingBase;

  /// The first remnant of sharding propagation in `module`, which
  /// partitioning would have consumed; null when there is none.
  Operation *findUnpartitioned(ModuleOp module) {
    Operation *found = nullptr;
    module.walk([&](Operation *op) {
      if (isa<ShardOp, ReshardOp>(op) ||
          op->hasAttr(LoomDialect::kShardingAttrName)) {
        found = op;
        return WalkResult::interrupt();
      }
      if (auto func = dyn_cast<func::FuncOp>(op))
        for (unsigned index = 0; index < func.getNumArguments(); ++index)
          if (func.getArgAttr(index, LoomDialect::kShardingAttrName)) {
            found = op;
            return WalkResult::interrupt();
          }
      return WalkResult::advance();
    });
    return found;
  }

  void explain(func::FuncOp func, const loomcost::LinkModel &link,
               raw_ostream &os) {
    int64_t ranks = func->hasAttr(LoomDialect::kRanksAttrName)
                        ? int64_t(LoomDialect::getRanksOf(func).size())
                        : LoomDialect::getWorldSize(func);
    os << "loom-explain-sharding: @" << func.getSymName() << " on " << ranks
       << (ranks == 1 ? " rank" : " ranks") << "; link "
       << llvm::format("%g", link.gigabytesPerSecond) << " GB/s, "
       << llvm::format("%g", link.latencyMicroseconds) << " us per step\n";
    std::map<CollectiveKind, Total> byKind;
    Total all;
    func.walk([&](Operation *op) {
      std::optional<CollectiveCost> cost = estimateCollectiveCost(op, link);
      if (!cost)
        return;
      byKind[cost->kind].add(*cost);
      all.add(*cost);
      os << "  #" << all.ops << " " << kindName(cost->kind) << detailOf(op)
         << " over " << cost->groupSize << " ranks at "
         << describeLocation(op->getLoc()) << "\n";
      auto info =
          op->getAttrOfType<DictionaryAttr>(LoomDialect::kReshardingAttrName);
      auto type = info ? info.getAs<TypeAttr>("type") : TypeAttr();
      auto from = info ? info.getAs<ShardingAttr>("from") : ShardingAttr();
      auto to = info ? info.getAs<ShardingAttr>("to") : ShardingAttr();
      auto origin = info ? info.getAs<StringAttr>("origin") : StringAttr();
      if (type && from && to) {
        os << "     value: " << formatType(type.getValue()) << " "
           << formatSharding(from) << " -> " << formatSharding(to) << "\n";
        os << "     origin: "
           << (origin && !origin.getValue().empty()
                   ? origin.getValue()
                   : StringRef("(no annotation reaches it)"))
           << "\n";
      } else {
        Type local = op->getNumResults() ? op->getResult(0).getType()
                                         : op->getOperand(0).getType();
        os << "     value: " << formatType(local)
           << " (as each rank holds it; not inserted by loom-partition)\n";
      }
      os << "     sends " << cost->bytesSent << " bytes per rank ("
         << shareOf(cost->kind) << " of " << cost->fullBytes << ") in "
         << loomcost::ringSteps(cost->kind, cost->groupSize)
         << (loomcost::ringSteps(cost->kind, cost->groupSize) == 1 ? " step"
                                                                   : " steps")
         << ": " << llvm::format("%.2f", cost->seconds * 1e6) << " us\n";
    });
    if (all.ops == 0) {
      os << "  no collectives\n";
      return;
    }
    os << "  totals for @" << func.getSymName() << " (one step):\n";
    auto row = [&](StringRef name, const Total &total) {
      os << "     " << llvm::left_justify(name, 14) << " "
         << llvm::format_decimal(total.ops, 3)
         << (total.ops == 1 ? " op  " : " ops ")
         << llvm::format_decimal(int64_t(total.bytes), 12) << " bytes per rank "
         << llvm::format("%12.2f", total.seconds * 1e6) << " us\n";
    };
    for (const auto &[kind, total] : byKind)
      row(kindName(kind), total);
    row("all kinds", all);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(linkGbps > 0) || !(linkLatencyUs >= 0)) {
      std::string values;
      llvm::raw_string_ostream(values)
          << llvm::format("%g and %g", double(linkGbps), double(linkLatencyUs));
      module.emitError("loom-explain-sharding needs link-gbps > 0 and "
                       "link-latency-us >= 0, got ")
          << values;
      return signalPassFailure();
    }
    if (Operation *op = findUnpartitioned(module)) {
      op->emitOpError("still carries shardings to partition; "
                      "loom-explain-sharding explains a partitioned module "
                      "(run loom-partition first)");
      return signalPassFailure();
    }
    // loom-partition gives the module its world size; a mesh without one
    // has annotations nothing has partitioned yet.
    auto meshes = module.getOps<MeshOp>();
    if (!meshes.empty() && !module->hasAttr(LoomDialect::kWorldSizeAttrName)) {
      (*meshes.begin())
          .emitOpError("is a mesh of a module that is not partitioned (no "
                       "loom.world_size); loom-explain-sharding explains a "
                       "partitioned module (run loom-propagate-sharding and "
                       "loom-partition first)");
      return signalPassFailure();
    }
    loomcost::LinkModel link{linkGbps, linkLatencyUs};
    std::unique_ptr<llvm::raw_fd_ostream> file;
    if (!reportFile.empty()) {
      std::error_code error;
      file = std::make_unique<llvm::raw_fd_ostream>(reportFile, error,
                                                    llvm::sys::fs::OF_Text);
      if (error) {
        module.emitError("cannot write ")
            << reportFile << ": " << error.message();
        return signalPassFailure();
      }
    }
    raw_ostream &os = file ? *file : llvm::outs();
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        explain(func, link, os);
    os.flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
