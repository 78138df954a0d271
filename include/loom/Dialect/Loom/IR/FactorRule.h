//===- FactorRule.h - Op iteration spaces as factors ------------*- C++ -*-===//
//
// A factor rule describes an op's iteration space as a list of factors and
// maps each dimension of each operand and result to the factors it is made
// of (major to minor). It is the one description of an op that sharding
// propagation, SPMD partitioning and the cost model read.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_FACTORRULE_H
#define LOOM_DIALECT_LOOM_IR_FACTORRULE_H

#include "mlir/IR/AffineMap.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace mlir {
class Operation;
namespace loom {

/// What sharding a factor does to an op.
enum class FactorKind {
  /// Present in the results; sharding it needs no communication.
  Parallel,
  /// A summed product (matmul's K, the rows a gather selects); sharding it
  /// leaves the results partial sums.
  Contracting,
  /// Summed away (reduce_sum, reduce_mean, a mean loss); sharding it leaves
  /// the results that lack it partial sums (layer_norm_grad's rows index
  /// dinput but are summed away from dscale and dbias).
  ReductionSum,
  /// Maximized away; sharding it leaves the results partial maxima.
  ReductionMax,
  /// The op needs the whole factor on every device (softmax axis, layer-norm
  /// dims, sliced or concatenated axes).
  NeedReplication,
};

/// The assembly name of a kind: `parallel`, `contracting`, `reduction_sum`,
/// `reduction_max`, `need_replication`.
llvm::StringRef stringifyFactorKind(FactorKind kind);

struct Factor {
  int64_t size;
  FactorKind kind;
};

/// For each dimension of one tensor, the factors it is made of, major to
/// minor. An empty list is a size-1 dimension that maps to no factor (a
/// broadcast dimension).
using TensorFactors = llvm::SmallVector<llvm::SmallVector<unsigned, 2>, 4>;

class FactorRule {
public:
  /// Adds a factor and returns its index.
  unsigned addFactor(int64_t size, FactorKind kind);
  void addOperand(TensorFactors dims) { operands.push_back(std::move(dims)); }
  void addResult(TensorFactors dims) { results.push_back(std::move(dims)); }

  llvm::ArrayRef<Factor> getFactors() const { return factors; }
  llvm::ArrayRef<TensorFactors> getOperands() const { return operands; }
  llvm::ArrayRef<TensorFactors> getResults() const { return results; }

  /// The linalg-style view: one map per operand then per result, from the
  /// factor space `(d0, ..., dn)` to tensor indices. A dimension made of
  /// several factors is their row-major linearization (`d2 * 64 + d3`); a
  /// dimension with no factor is the constant 0.
  llvm::SmallVector<AffineMap> getIndexingMaps(MLIRContext *context) const;

  /// Checks that the rule fits `op`: one entry per operand and result, one
  /// list per dimension, every factor used, and the factors of every
  /// dimension multiplying to its size.
  LogicalResult verify(Operation *op) const;

  /// Prints `iterators = [...], sizes = [...], maps = [...]`.
  void print(llvm::raw_ostream &os, MLIRContext *context) const;

private:
  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<TensorFactors> operands;
  llvm::SmallVector<TensorFactors> results;
};

/// The rule of an elementwise op: one parallel factor per dimension of the
/// first result; operands (and further results) are mapped with numpy
/// broadcasting against it.
FactorRule getElementwiseFactorRule(Operation *op);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOM_IR_FACTORRULE_H
