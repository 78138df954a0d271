//===- ParameterCopies.h - bf16 copies of f32 parameters -------*- C++ -*-===//
//
// Mixed precision's bf16 copy of an f32 master weight: a parameter of its
// own, `<name>.bf16`, initialized to `#loom.cast_of<@name>`, that the GEMMs
// read and the master's update writes. loom-cache-parameter-casts makes
// them on one rank; ZeRO stages 1 and 2 (loom-propagate-sharding) make a
// whole one for a master that lives as its shard.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PARAMETERCOPIES_H
#define LOOM_LIB_TRANSFORMS_PARAMETERCOPIES_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {

/// Declares the `element` copy of `parameter` right after it, with
/// `sharding` (none: replicated), under a free name (`<name>.bf16`, renamed
/// by `symbols` if taken). A shapes-only parameter's copy still names its
/// source, so that a plan says which weight is whose copy.
inline ParameterOp declareCastCopy(ParameterOp parameter, Type element,
                                   ShardingAttr sharding,
                                   SymbolTable &symbols) {
  OpBuilder builder(parameter);
  builder.setInsertionPointAfter(parameter);
  auto copy = builder.create<ParameterOp>(
      parameter.getLoc(),
      builder.getStringAttr(parameter.getSymName() + ".bf16"),
      TypeAttr::get(parameter.getTensorType().clone(element)),
      /*trainable=*/UnitAttr(), sharding,
      CastOfAttr::get(builder.getContext(),
                      FlatSymbolRefAttr::get(parameter.getSymNameAttr())));
  symbols.insert(copy);
  return copy;
}

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_PARAMETERCOPIES_H
