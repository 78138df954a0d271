//===- LoomDialect.cpp - The loom dialect ---------------------------------===//

#include "loom/Dialect/Loom/IR/LoomDialect.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;
using namespace mlir::loom;

#include "loom/Dialect/Loom/IR/LoomDialect.cpp.inc"

void LoomDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"
      >();
}

Operation *LoomDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Discardable `loom.*` attributes
//===----------------------------------------------------------------------===//

/// Only `loom.sharding` may appear as a discardable attribute of an op or
/// signature (`loom.world_size` and `loom.ranks` are checked before).
static LogicalResult checkAttrName(Operation *op, NamedAttribute attr) {
  if (attr.getName() == LoomDialect::kShardingAttrName)
    return success();
  return op->emitOpError() << "has unknown loom attribute '"
                           << attr.getName().getValue() << "'; known: '"
                           << LoomDialect::kShardingAttrName << "', '"
                           << LoomDialect::kShardingOriginAttrName << "', '"
                           << LoomDialect::kReshardingAttrName << "', '"
                           << LoomDialect::kFactorShardingAttrName << "', '"
                           << LoomDialect::kGradientAccumulationAttrName
                           << "', '" << LoomDialect::kStageAttrName << "', '"
                           << LoomDialect::kMicrobatchAttrName << "', '"
                           << LoomDialect::kBackwardAttrName << "', '"
                           << LoomDialect::kRecomputedAttrName << "', '"
                           << LoomDialect::kKeptGradientAttrName << "', '"
                           << LoomDialect::kParameterGradientAttrName << "', '"
                           << LoomDialect::kGradientBytesAttrName << "', '"
                           << LoomDialect::kPendingMicrobatchesAttrName
                           << "' (functions), '"
                           << LoomDialect::kWorldSizeAttrName << "', '"
                           << LoomDialect::kPipelineScheduleAttrName
                           << "' (modules), '" << LoomDialect::kRanksAttrName
                           << "' (functions)";
}

int64_t LoomDialect::getWorldSize(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto size = op->getAttrOfType<IntegerAttr>(kWorldSizeAttrName))
      return size.getInt();
  return 1;
}

SmallVector<int64_t> LoomDialect::getRanksOf(Operation *func) {
  if (auto ranks = func->getAttrOfType<DenseI64ArrayAttr>(kRanksAttrName))
    return SmallVector<int64_t>(ranks.asArrayRef());
  return llvm::to_vector(llvm::seq<int64_t>(0, getWorldSize(func)));
}

/// `loom.world_size` on a module, `loom.ranks` on a function.
static LogicalResult verifyRankAttr(Operation *op, NamedAttribute attr) {
  if (attr.getName() == LoomDialect::kWorldSizeAttrName) {
    auto size = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !size || size.getInt() < 1)
      return op->emitOpError() << "'" << LoomDialect::kWorldSizeAttrName
                               << "' must be a positive integer on a module";
    return success();
  }
  auto ranks = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!isa<FunctionOpInterface>(op) || !ranks || ranks.empty())
    return op->emitOpError() << "'" << LoomDialect::kRanksAttrName
                             << "' must be a non-empty array<i64> of world "
                                "ranks on a function";
  int64_t worldSize = LoomDialect::getWorldSize(op);
  int64_t previous = -1;
  for (int64_t rank : ranks.asArrayRef()) {
    if (rank <= previous || rank >= worldSize)
      return op->emitOpError()
             << "'" << LoomDialect::kRanksAttrName
             << "' must list ranks in [0, " << worldSize
             << ") (the module's loom.world_size) in increasing order";
    previous = rank;
  }
  return success();
}

/// `loom.sharding_origin`: a string, or an array of strings (one per
/// result).
static LogicalResult verifyOriginAttr(Operation *op, NamedAttribute attr) {
  Attribute value = attr.getValue();
  auto array = dyn_cast<ArrayAttr>(value);
  if (isa<StringAttr>(value) ||
      (array && llvm::all_of(array, llvm::IsaPred<StringAttr>)))
    return success();
  return op->emitOpError() << "'" << LoomDialect::kShardingOriginAttrName
                           << "' must be a string or an array of strings";
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kWorldSizeAttrName || attr.getName() == kRanksAttrName)
    return verifyRankAttr(op, attr);
  if (attr.getName() == kShardingOriginAttrName)
    return verifyOriginAttr(op, attr);
  if (attr.getName() == kFactorShardingAttrName) {
    auto factors = dyn_cast<ArrayAttr>(attr.getValue());
    if (!factors || !llvm::all_of(factors, [](Attribute factor) {
          auto axes = dyn_cast<ArrayAttr>(factor);
          return axes && llvm::all_of(axes, llvm::IsaPred<StringAttr>);
        }))
      return op->emitOpError() << "'" << kFactorShardingAttrName
                               << "' must be an array of arrays of axis names";
    return success();
  }
  if (attr.getName() == kGradientAccumulationAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<AddOp>(op))
      return op->emitOpError() << "'" << kGradientAccumulationAttrName
                               << "' must be a unit attribute on a loom.add";
    return success();
  }
  if (attr.getName() == kStageAttrName ||
      attr.getName() == kMicrobatchAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0)
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a non-negative integer";
    return success();
  }
  if (attr.getName() == kBackwardAttrName ||
      attr.getName() == kRecomputedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a unit attribute";
    return success();
  }
  if (attr.getName() == kKeptGradientAttrName ||
      attr.getName() == kParameterGradientAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<CastOp>(op))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a unit attribute on a loom.cast";
    return success();
  }
  if (attr.getName() == kGradientBytesAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || bytes.getInt() < 0 || !isa<FunctionOpInterface>(op))
      return op->emitOpError()
             << "'" << kGradientBytesAttrName
             << "' must be a non-negative integer on a function";
    return success();
  }
  if (attr.getName() == kPendingMicrobatchesAttrName) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!count || count.getInt() < 1 || !isa<FunctionOpInterface>(op))
      return op->emitOpError() << "'" << kPendingMicrobatchesAttrName
                               << "' must be a positive integer on a function";
    return success();
  }
  if (attr.getName() == kPipelineScheduleAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto isInt = [&](StringRef name) {
      return dict && dict.getAs<IntegerAttr>(name);
    };
    auto actions = dict ? dict.getAs<ArrayAttr>("actions") : ArrayAttr();
    if (!isa<ModuleOp>(op) || !isInt("ranks") || !isInt("stages") ||
        !isInt("microbatches") || !actions ||
        !llvm::all_of(actions, llvm::IsaPred<StringAttr>))
      return op->emitOpError()
             << "'" << kPipelineScheduleAttrName
             << "' must be a dictionary on a module with integer 'ranks', "
                "'stages' and 'microbatches' and 'actions' (strings)";
    return success();
  }
  if (attr.getName() == kReshardingAttrName) {
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << kReshardingAttrName << "' must be a dictionary";
    return success();
  }
  if (failed(checkAttrName(op, attr)))
    return failure();
  // One sharding per result: a bare attribute for single-result ops, an
  // array otherwise.
  SmallVector<ShardingAttr> shardings;
  if (auto sharding = dyn_cast<ShardingAttr>(attr.getValue())) {
    shardings.push_back(sharding);
  } else if (auto array = dyn_cast<ArrayAttr>(attr.getValue())) {
    for (Attribute element : array) {
      auto sharding = dyn_cast<ShardingAttr>(element);
      if (!sharding)
        return op->emitOpError() << "'" << kShardingAttrName
                                 << "' array elements must be #loom.sharding, "
                                    "got "
                                 << element;
      shardings.push_back(sharding);
    }
  } else {
    return op->emitOpError() << "'" << kShardingAttrName
                             << "' must be a #loom.sharding or an array of "
                                "them, got "
                             << attr.getValue();
  }
  if (shardings.size() != op->getNumResults())
    return op->emitOpError()
           << "'" << kShardingAttrName << "' gives " << shardings.size()
           << " sharding(s) for " << op->getNumResults() << " result(s)";
  for (auto [index, sharding] : llvm::enumerate(shardings)) {
    std::string what = "result #" + std::to_string(index);
    if (failed(verifyShardingOf(op, sharding, op->getResult(index).getType(),
                                what)))
      return failure();
  }
  return success();
}

/// Shared by argument and result attributes of function-like ops.
static LogicalResult verifyFunctionShardingAttr(Operation *op,
                                                NamedAttribute attr, Type type,
                                                StringRef what) {
  if (failed(checkAttrName(op, attr)))
    return failure();
  auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
  if (!sharding)
    return op->emitOpError() << "'" << LoomDialect::kShardingAttrName << "' on "
                             << what << " must be a #loom.sharding";
  return verifyShardingOf(op, sharding, type, what);
}

/// Shardings on a function's argument or result #index. MLIR calls the two
/// hooks below only for function-like ops (FunctionOpInterface), whose types
/// exist even for declarations.
static LogicalResult verifySignatureAttr(Operation *op, NamedAttribute attr,
                                         unsigned index, bool isResult) {
  StringRef kind = isResult ? "result" : "argument";
  // The rows of a training step's global batch that each rank's input
  // holds (one offset per rank of the function); the plan emitter checks
  // the count against the function's ranks.
  if (!isResult && attr.getName() == "loom.batch_offsets") {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!offsets || offsets.empty() ||
        llvm::any_of(offsets.asArrayRef(),
                     [](int64_t offset) { return offset < 0; }))
      return op->emitOpError()
             << "'loom.batch_offsets' on argument #" << index
             << " must be a non-empty array<i64> of batch row offsets >= 0";
    return success();
  }
  if (attr.getName() == LoomDialect::kShardingOriginAttrName)
    return verifyOriginAttr(op, attr);
  if (isResult && attr.getName() == LoomDialect::kGradientOfAttrName) {
    if (!isa<FlatSymbolRefAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << LoomDialect::kGradientOfAttrName << "' on result #"
             << index << " must name a loom.parameter";
    return success();
  }
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitOpError() << "'" << LoomDialect::kShardingAttrName << "' "
                             << kind << " attributes need a function op";
  Type type = isResult ? function.getResultTypes()[index]
                       : function.getArgumentTypes()[index];
  return verifyFunctionShardingAttr(op, attr, type,
                                    (kind + " #" + Twine(index)).str());
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  return verifySignatureAttr(op, attr, argIndex, /*isResult=*/false);
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  return verifySignatureAttr(op, attr, resultIndex, /*isResult=*/true);
}
