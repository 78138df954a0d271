//===- LoomAttrs.h - Loom enums and attributes ------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMATTRS_H
#define LOOM_DIALECT_LOOM_IR_LOOMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

#include "loom/Dialect/Loom/IR/LoomEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomAttrs.h.inc"

namespace mlir {
class Operation;
class SymbolTableCollection;
namespace loom {

/// Finds the `loom.mesh` symbol `name` from `from`'s nearest symbol table.
/// Emits an error on `from` and fails if there is none. `tables`, when given,
/// caches symbol tables across lookups (verifiers of many ops).
FailureOr<MeshAttr> lookupMesh(Operation *from, FlatSymbolRefAttr name,
                               SymbolTableCollection *tables = nullptr);

/// Checks `sharding` against the mesh it refers to and the tensor type it
/// describes: known axes, matching rank, and every split dividing its
/// static dimension.
LogicalResult
verifySharding(ShardingAttr sharding, MeshAttr mesh, Type type,
               llvm::function_ref<InFlightDiagnostic()> emitError);

/// lookupMesh + verifySharding, with errors reported on `op`; `what` names
/// the sharded value in messages ("result #0").
LogicalResult verifyShardingOf(Operation *op, ShardingAttr sharding, Type type,
                               llvm::StringRef what,
                               SymbolTableCollection *tables = nullptr);

/// The type of one rank's shard of a tensor of type `global` laid out as
/// `sharding` says over `mesh`: each dimension divided by the product of the
/// sizes of the mesh axes that split it (a partial state changes no shape).
/// `sharding` must be valid for `global` and `mesh` (verifySharding).
RankedTensorType getShardType(RankedTensorType global, ShardingAttr sharding,
                              MeshAttr mesh);

/// getShardType with the mesh `sharding` names, looked up from `from`; null
/// when there is no such mesh or `sharding` does not fit `global` on it
/// (which the sharded op's own verifier reports).
RankedTensorType getShardType(Operation *from, RankedTensorType global,
                              ShardingAttr sharding,
                              SymbolTableCollection &tables);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOM_IR_LOOMATTRS_H
