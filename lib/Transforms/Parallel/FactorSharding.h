//===- FactorSharding.h - Shardings seen through factor rules ---*- C++ -*-===//
//
// Sharding propagation and SPMD partitioning both read an op through its
// factor rule: the axes that split each tensor dimension are moved onto the
// factors the dimension is made of, merged per factor across the op's
// operands and results, and moved back onto every tensor. These helpers do
// the two moves; they are internal to the parallel passes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PARALLEL_FACTORSHARDING_H
#define LOOM_LIB_TRANSFORMS_PARALLEL_FACTORSHARDING_H

#include "loom/Dialect/Loom/IR/FactorRule.h"
#include "loom/Dialect/Loom/IR/LoomAttrs.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {

/// Mesh axes, major to minor.
using AxisList = SmallVector<StringAttr, 2>;
/// The axes that split each dimension of one tensor.
using DimAxes = SmallVector<AxisList, 4>;
/// The axes that split each factor of one op's rule.
using FactorAxes = SmallVector<AxisList, 6>;

/// The product of the sizes of `axes` in `mesh`.
int64_t axesSize(MeshAttr mesh, ArrayRef<StringAttr> axes);

/// Splits `axes` (one dimension's) among `factors` (the factors the
/// dimension is made of, major to minor): axes go to the major factor while
/// their product divides it, and to the next factor only once the major one
/// is split completely. Size-1 factors take no axis. Returns, per position
/// in `factors`, the axes it received; axes that fit nowhere are dropped and
/// `complete` (if given) is set false.
SmallVector<AxisList> splitDimAxes(ArrayRef<unsigned> factors,
                                   ArrayRef<StringAttr> axes,
                                   const FactorRule &rule, MeshAttr mesh,
                                   bool *complete = nullptr);

/// The axes of a dimension made of `factors`, given each factor's axes: the
/// major factor's axes, then the next factor's only while every factor
/// before it is split completely (a dimension is split into contiguous
/// blocks; a minor factor split under an unsplit major one would be
/// strided).
AxisList joinDimAxes(ArrayRef<unsigned> factors, const FactorAxes &axes,
                     const FactorRule &rule, MeshAttr mesh);

/// The per-factor axes of one tensor (`dims`: its factors per dimension).
/// A factor the tensor does not touch gets no entry (empty list).
FactorAxes tensorFactorAxes(ArrayRef<SmallVector<unsigned, 2>> dims,
                            const DimAxes &axes, const FactorRule &rule,
                            MeshAttr mesh, bool *complete = nullptr);

/// The dimension axes of one tensor given every factor's axes.
DimAxes tensorDimAxes(ArrayRef<SmallVector<unsigned, 2>> dims,
                      const FactorAxes &axes, const FactorRule &rule,
                      MeshAttr mesh);

/// Drops the axes of every factor that some operand or result of `rule`
/// could not express: a factor after one that is not split completely in
/// the same dimension (the dimension would be cut into strided pieces).
void dropInexpressible(FactorAxes &axes, const FactorRule &rule, MeshAttr mesh);

/// The dimension axes of a sharding attribute.
DimAxes dimAxesOf(ShardingAttr sharding);

/// A sharding attribute of `dims`, closed unless `open` says otherwise.
ShardingAttr makeSharding(MLIRContext *context, FlatSymbolRefAttr mesh,
                          const DimAxes &dims, ArrayRef<bool> open = {},
                          PartialKind partialKind = PartialKind::none,
                          ArrayRef<StringAttr> partialAxes = {});

/// `{tp}` style text of one dimension's axes, `[{tp}, {}]` of a tensor's.
std::string formatDimAxes(const DimAxes &dims);

/// The shard shape of `shape` split by `dims`.
SmallVector<int64_t> localShape(ArrayRef<int64_t> shape, const DimAxes &dims,
                                MeshAttr mesh);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_PARALLEL_FACTORSHARDING_H
