//===- ShardingPropagation.h - The propagation engine -----------*- C++ -*-===//
//
// The engine behind loom-propagate-sharding and the tactics that decide
// what to annotate (which need to see what an annotation would imply before
// adding the next). Seeds are planted per priority and propagated to a
// fixed point with a worklist, so adding one seed costs only the region it
// reaches.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PARALLEL_SHARDINGPROPAGATION_H
#define LOOM_LIB_TRANSFORMS_PARALLEL_SHARDINGPROPAGATION_H

#include "FactorSharding.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <deque>
#include <limits>

namespace mlir {
namespace loom {

class ShardingPropagation {
public:
  static constexpr int64_t kUnset = std::numeric_limits<int64_t>::max();

  /// What propagation knows of one value (or parameter).
  struct Entry {
    DimAxes axes;
    /// Per dimension: no axis may be added (annotations without `?`).
    SmallVector<bool> closed;
    int64_t priority = kUnset;
    std::string origin;

    bool isSet() const { return priority != kUnset; }
  };

  ShardingPropagation(ModuleOp module, func::FuncOp func, MeshAttr mesh,
                      FlatSymbolRefAttr meshName);

  /// Plants an annotation; a value or parameter that a better priority has
  /// decided already keeps its sharding (the annotation is noted as lost).
  void seedParameter(StringAttr name, ShardingAttr sharding, int64_t priority,
                     StringRef origin);
  void seedValue(Value value, ShardingAttr sharding, int64_t priority,
                 StringRef origin);

  /// Propagates what was planted to a fixed point, at `priority`.
  void propagate(int64_t priority);

  /// The entry of a parameter (null if none was made).
  const Entry *parameterEntry(StringAttr name) const;
  /// The entry of a value (a read of a parameter gives the parameter's).
  const Entry &valueEntry(Value value) { return entryOf(value); }

  /// Makes each remaining disagreement an explicit `loom.reshard`.
  void insertReshards();
  /// Writes `loom.sharding`, `loom.sharding_origin` and the parameters'
  /// shardings onto the IR.
  void write();

private:
  struct Slot {
    Entry *entry;
    ArrayRef<SmallVector<unsigned, 2>> dims;
    bool isResult;
    unsigned index;
    Value value;          // null for an assign's parameter slot
    StringAttr parameter; // set where the entry is a parameter's
  };
  struct Merge {
    FactorAxes axes;
    SmallVector<int> source;
    SmallVector<std::pair<int, unsigned>> conflicts;
  };

  Entry &entryOf(Value value);
  const FactorRule &ruleOf(Operation *op);
  /// (Most ops have a few operands and results: inline, no allocation.)
  using Slots = SmallVector<Slot, 6>;
  Slots slotsOf(Operation *op, const FactorRule &rule);
  Merge merge(const FactorRule &rule, ArrayRef<Slot> slots);
  bool refine(const Slot &slot, const Merge &merged, ArrayRef<Slot> slots,
              const FactorRule &rule, int64_t priority, Operation *op);
  void visit(Operation *op, int64_t priority);
  void plant(Entry &entry, ShardingAttr sharding, int64_t priority,
             StringRef origin);
  void enqueueAround(Value value, StringAttr parameter);
  void enqueue(Operation *op);

  ModuleOp module;
  func::FuncOp func;
  MeshAttr mesh;
  FlatSymbolRefAttr meshName;
  llvm::MapVector<StringAttr, ParameterOp> parameters;
  /// Entries live in `storage`, whose elements never move (slots hold
  /// pointers to them while new entries are made).
  Entry &valueSlot(Value value);
  Entry &parameterSlot(StringAttr name);
  std::deque<Entry> storage;
  DenseMap<Value, Entry *> values;
  DenseMap<StringAttr, Entry *> paramEntries;
  /// The ops that touch a parameter: its reads' users and its stores.
  DenseMap<StringAttr, SmallVector<Operation *>> parameterUsers;
  /// Owned one by one: visit holds a rule while other ops' rules are made.
  DenseMap<Operation *, std::unique_ptr<FactorRule>> rules;
  /// Ops to visit: those whose factors are all parallel first.
  std::deque<Operation *> passThroughQueue, otherQueue;
  llvm::DenseSet<Operation *> queued;
};

/// A short description of an op for origins and reasons: its name and its
/// location (the ONNX node name where there is one).
std::string describeOp(Operation *op);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_PARALLEL_SHARDINGPROPAGATION_H
