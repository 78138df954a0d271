//===- FactorSharding.cpp - Shardings seen through factor rules -----------===//

#include "FactorSharding.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

int64_t mlir::loom::axesSize(MeshAttr mesh, ArrayRef<StringAttr> axes) {
  int64_t size = 1;
  for (StringAttr axis : axes)
    size *= mesh.getAxisSize(axis.getValue());
  return size;
}

SmallVector<AxisList> mlir::loom::splitDimAxes(ArrayRef<unsigned> factors,
                                               ArrayRef<StringAttr> axes,
                                               const FactorRule &rule,
                                               MeshAttr mesh, bool *complete) {
  SmallVector<AxisList> perFactor(factors.size());
  size_t position = 0;
  int64_t split = 1; // shards of factors[position] so far
  for (StringAttr axis : axes) {
    int64_t axisSize = mesh.getAxisSize(axis.getValue());
    // Skip factors that are already split completely (or have size 1).
    while (position < factors.size() &&
           rule.getFactors()[factors[position]].size == split) {
      ++position;
      split = 1;
    }
    if (position == factors.size() ||
        rule.getFactors()[factors[position]].size % (split * axisSize) != 0) {
      if (complete)
        *complete = false;
      break;
    }
    perFactor[position].push_back(axis);
    split *= axisSize;
  }
  return perFactor;
}

AxisList mlir::loom::joinDimAxes(ArrayRef<unsigned> factors,
                                 const FactorAxes &axes, const FactorRule &rule,
                                 MeshAttr mesh) {
  AxisList joined;
  for (unsigned factor : factors) {
    const AxisList &mine = axes[factor];
    joined.append(mine.begin(), mine.end());
    if (axesSize(mesh, mine) != rule.getFactors()[factor].size)
      break;
  }
  return joined;
}

FactorAxes mlir::loom::tensorFactorAxes(ArrayRef<SmallVector<unsigned, 2>> dims,
                                        const DimAxes &axes,
                                        const FactorRule &rule, MeshAttr mesh,
                                        bool *complete) {
  FactorAxes result(rule.getFactors().size());
  for (auto [dim, factors] : llvm::enumerate(dims)) {
    if (dim >= axes.size() || axes[dim].empty())
      continue;
    if (factors.empty()) {
      if (complete)
        *complete = false;
      continue;
    }
    SmallVector<AxisList> split =
        splitDimAxes(factors, axes[dim], rule, mesh, complete);
    for (auto [position, factor] : llvm::enumerate(factors))
      result[factor] = split[position];
  }
  return result;
}

DimAxes mlir::loom::tensorDimAxes(ArrayRef<SmallVector<unsigned, 2>> dims,
                                  const FactorAxes &axes,
                                  const FactorRule &rule, MeshAttr mesh) {
  DimAxes result;
  for (const SmallVector<unsigned, 2> &factors : dims)
    result.push_back(joinDimAxes(factors, axes, rule, mesh));
  return result;
}

void mlir::loom::dropInexpressible(FactorAxes &axes, const FactorRule &rule,
                                   MeshAttr mesh) {
  auto visit = [&](ArrayRef<TensorFactors> tensors) {
    for (const TensorFactors &tensor : tensors)
      for (const SmallVector<unsigned, 2> &factors : tensor) {
        bool whole = true; // every factor so far is split completely
        for (unsigned factor : factors) {
          if (!whole)
            axes[factor].clear();
          else if (axesSize(mesh, axes[factor]) !=
                   rule.getFactors()[factor].size)
            whole = false;
        }
      }
  };
  visit(rule.getOperands());
  visit(rule.getResults());
}

DimAxes mlir::loom::dimAxesOf(ShardingAttr sharding) {
  DimAxes dims;
  MLIRContext *context = sharding.getContext();
  for (unsigned dim = 0; dim < sharding.getRank(); ++dim) {
    AxisList &axes = dims.emplace_back();
    for (StringRef axis : sharding.getDimAxes(dim))
      axes.push_back(StringAttr::get(context, axis));
  }
  return dims;
}

ShardingAttr mlir::loom::makeSharding(MLIRContext *context,
                                      FlatSymbolRefAttr mesh,
                                      const DimAxes &dims, ArrayRef<bool> open,
                                      PartialKind partialKind,
                                      ArrayRef<StringAttr> partialAxes) {
  Builder builder(context);
  SmallVector<Attribute> dimAttrs;
  for (auto [index, axes] : llvm::enumerate(dims)) {
    SmallVector<Attribute> names(axes.begin(), axes.end());
    if (index < open.size() && open[index])
      names.push_back(builder.getStringAttr("?"));
    dimAttrs.push_back(builder.getArrayAttr(names));
  }
  SmallVector<Attribute> partial(partialAxes.begin(), partialAxes.end());
  return ShardingAttr::get(context, mesh, builder.getArrayAttr(dimAttrs),
                           partialKind, builder.getArrayAttr(partial));
}

std::string mlir::loom::formatDimAxes(const DimAxes &dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(dims, os, [&](const AxisList &axes) {
    os << "{";
    llvm::interleaveComma(axes, os,
                          [&](StringAttr axis) { os << axis.getValue(); });
    os << "}";
  });
  os << "]";
  return text;
}

SmallVector<int64_t> mlir::loom::localShape(ArrayRef<int64_t> shape,
                                            const DimAxes &dims,
                                            MeshAttr mesh) {
  SmallVector<int64_t> local(shape);
  for (auto [dim, axes] : llvm::enumerate(dims))
    if (dim < local.size())
      local[dim] /= axesSize(mesh, axes);
  return local;
}
