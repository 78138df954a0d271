//===- CacheParameterCasts.cpp - bf16 copies of f32 parameters ------------===//
//
// Mixed precision casts every f32 weight to bf16 before its GEMM, once per
// step: for GPT-2 small, 61 kernels (weights and the QKV biases) that read
// 494 MB and write 247 MB, and an arena that holds the bf16 copies for the
// whole step. The cast only
// changes when the weight does, and the weight changes in one place, the
// optimizer's update, whose kernel already holds the new value in a
// register. So the copy becomes a parameter of its own that the update
// writes and the GEMMs read: the master-weight scheme of mixed-precision
// training, with the f32 parameter as the master.
//
//===----------------------------------------------------------------------===//

#include "../ParameterCopies.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMCACHEPARAMETERCASTS
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// The parameter `cast` reads when it narrows a `loom.param` read from f32
/// or f64 to bf16; else null.
ParameterOp castParameter(CastOp cast, SymbolTableCollection &tables) {
  auto read = cast.getInput().getDefiningOp<ParamOp>();
  if (!read || !cast.getType().getElementType().isBF16())
    return {};
  auto parameter =
      tables.lookupNearestSymbolFrom<ParameterOp>(read, read.getNameAttr());
  if (!parameter)
    return {};
  Type element = parameter.getTensorType().getElementType();
  // Copies are bf16 themselves, so they never qualify.
  if (!element.isF32() && !element.isF64())
    return {};
  return parameter;
}

struct CacheParameterCastsPass
    : impl::LoomCacheParameterCastsBase<CacheParameterCastsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection tables;
    // The module's own functions: a nested module has its own parameters.
    SmallVector<std::pair<CastOp, ParameterOp>> casts;
    for (auto func : module.getOps<func::FuncOp>())
      func.walk([&](CastOp cast) {
        if (ParameterOp parameter = castParameter(cast, tables))
          casts.emplace_back(cast, parameter);
      });
    if (casts.empty())
      return;
    // Every store of a parameter, in any function: each gets a store of the
    // copy, so that no function can leave the copy stale.
    DenseMap<StringAttr, SmallVector<AssignOp>> assigns;
    for (auto func : module.getOps<func::FuncOp>())
      func.walk([&](AssignOp assign) {
        assigns[assign.getNameAttr().getAttr()].push_back(assign);
      });

    SymbolTable &symbols = tables.getSymbolTable(module);
    DenseMap<Operation *, ParameterOp> copies;
    for (auto [cast, parameter] : casts) {
      ParameterOp &copy = copies[parameter];
      if (!copy)
        copy = addCopy(parameter, cast.getType().getElementType(), symbols,
                       assigns.lookup(parameter.getSymNameAttr()));
      OpBuilder builder(cast);
      Value read = builder.create<ParamOp>(cast.getLoc(), cast.getType(),
                                           copy.getSymName());
      auto original = cast.getInput().getDefiningOp<ParamOp>();
      cast.replaceAllUsesWith(read);
      cast.erase();
      if (original->use_empty())
        original.erase();
    }
  }

  /// Declares the `element` (bf16) copy of `parameter` next to it and
  /// stores the cast of every new value of the parameter into it. The copy
  /// has the parameter's shape and sharding; in a partitioned function,
  /// reads, stores and casts keep the shard type they have.
  ParameterOp addCopy(ParameterOp parameter, Type element, SymbolTable &symbols,
                      ArrayRef<AssignOp> assigns) {
    ParameterOp copy = declareCastCopy(parameter, element,
                                       parameter.getShardingAttr(), symbols);
    OpBuilder builder(copy);
    for (AssignOp assign : assigns) {
      builder.setInsertionPointAfter(assign);
      auto type = cast<RankedTensorType>(assign.getValue().getType());
      Value narrow = builder.create<CastOp>(
          assign.getLoc(), type.clone(element), assign.getValue());
      builder.create<AssignOp>(assign.getLoc(), copy.getSymName(), narrow);
    }
    return copy;
  }
};

} // namespace
} // namespace loom
} // namespace mlir
