//===- UnrollMicrobatches.cpp - A pipelined step's unbuilt microbatches ---===//
//
// loom-build-train-step builds a pipelined step with its first few
// microbatches only (`microbatch-copies`), so that sharding propagation and
// partitioning, whose time grows with the ops they see, see a few copies of
// the forward and backward instead of all of them. This pass makes the rest
// after partitioning, from the last microbatch built. Every microbatch is
// the same ops on its own slice of the batch, so the clones are what
// building and partitioning them would have made; the pass checks that the
// built microbatches are alike before it relies on it.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMUNROLLMICROBATCHES
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// What an op of the step is: in a microbatch (>= 0), shared by all of them
/// (read before them: parameters, the update count), or after them (sums
/// over microbatches and what follows).
constexpr int kShared = -1;
constexpr int kAfter = -2;

/// An integer attribute that differs between microbatches: its value at
/// microbatch 0 and its step per microbatch (one entry per element).
struct SteppedAttr {
  StringAttr name;
  bool array;
  SmallVector<int64_t> base, step;
};

class MicrobatchUnroller {
public:
  MicrobatchUnroller(func::FuncOp step, int64_t total)
      : step(step), total(total) {}

  LogicalResult run() {
    classify();
    if (failed(collectGroups()) || failed(compareGroups()) ||
        failed(findSums()))
      return failure();
    unroll();
    return success();
  }

private:
  int kindOf(Value value) const {
    Operation *def = value.getDefiningOp();
    if (!def)
      return kShared;
    auto it = kind.find(def);
    return it == kind.end() ? kShared : it->second;
  }

  /// Each op's microbatch, forward from the ops that carry one, then back
  /// from their readers to the work only they read (what partitioning made
  /// of their slice of the arguments: reshapes, a tensor-parallel gather).
  void classify() {
    Block &body = step.getBody().front();
    for (Operation &op : body.without_terminator()) {
      ops.push_back(&op);
      position[&op] = ops.size() - 1;
    }
    for (Operation *op : ops) {
      if (auto microbatch = op->getAttrOfType<IntegerAttr>(
              LoomDialect::kMicrobatchAttrName)) {
        kind[op] = int(microbatch.getInt());
        continue;
      }
      int k = kShared;
      for (Value operand : op->getOperands()) {
        int of = kindOf(operand);
        if (of == kShared)
          continue;
        if (of == kAfter || (k != kShared && k != of)) {
          k = kAfter;
          break;
        }
        k = of;
      }
      kind[op] = k;
    }
    for (Operation *op : llvm::reverse(ops)) {
      if (kind[op] != kShared || op->use_empty())
        continue;
      int k = kShared;
      for (Operation *user : op->getUsers()) {
        auto it = kind.find(user);
        int of = it == kind.end() ? kAfter : it->second;
        if (of < 0 || (k != kShared && k != of)) {
          k = kShared;
          break;
        }
        k = of;
      }
      kind[op] = k;
    }
  }

  /// Each built microbatch's ops in the step's order.
  LogicalResult collectGroups() {
    int built = 0;
    for (Operation *op : ops)
      built = std::max(built, kind[op] + 1);
    if (built < 3)
      return step.emitOpError("has ")
             << built << " microbatches built of its "
             << LoomDialect::kPendingMicrobatchesAttrName << " = " << total
             << ": loom-unroll-microbatches needs at least 3 to make the "
                "others from";
    if (built >= total)
      return step.emitOpError("has ")
             << built << " microbatches built, but its "
             << LoomDialect::kPendingMicrobatchesAttrName << " is " << total;
    groups.resize(built);
    for (Operation *op : ops)
      if (kind[op] >= 0) {
        indexInGroup[op] = groups[kind[op]].size();
        groups[kind[op]].push_back(op);
      }
    return success();
  }

  /// The op of microbatch `k` at the place of `op` (of the last microbatch).
  Value counterpart(Value value, int k) const {
    Operation *def = value.getDefiningOp();
    return groups[k][indexInGroup.lookup(def)]->getResult(
        cast<OpResult>(value).getResultNumber());
  }

  InFlightDiagnostic differ(int k, size_t index, const Twine &what) const {
    int last = groups.size() - 1;
    Operation *op = groups[last][index];
    InFlightDiagnostic diag = op->emitOpError();
    diag << "of microbatch " << last
         << " is unlike its counterpart in microbatch " << k << " (op #"
         << index << " of each): " << what
         << "; loom-unroll-microbatches makes the step's other microbatches "
            "from the last one built only when the built ones are alike";
    diag.attachNote(groups[k][index]->getLoc()) << "the counterpart";
    return diag;
  }

  /// Attribute values of the microbatches, as integers, when they are
  /// integers of the same form.
  static std::optional<SmallVector<int64_t>> integers(Attribute attr) {
    if (auto integer = dyn_cast<IntegerAttr>(attr);
        integer && integer.getType().isSignlessInteger(64))
      return SmallVector<int64_t>{integer.getInt()};
    if (auto array = dyn_cast<DenseI64ArrayAttr>(attr))
      return SmallVector<int64_t>(array.asArrayRef());
    return std::nullopt;
  }

  /// Where a sharding or a collective comes from (for loom-explain-
  /// sharding) may name another op of each microbatch: propagation reaches
  /// microbatches by different paths. The clones say what the last one
  /// says; the shardings themselves must be equal.
  static Attribute withoutOrigin(Attribute value, StringAttr name) {
    if (name.getValue() == LoomDialect::kShardingOriginAttrName)
      return Attribute();
    auto dict = dyn_cast_if_present<DictionaryAttr>(value);
    if (!dict || name.getValue() != LoomDialect::kReshardingAttrName)
      return value;
    NamedAttrList entries(dict);
    entries.erase("origin");
    return entries.getDictionary(dict.getContext());
  }

  /// An op's attributes, those it leaves at their defaults included (a
  /// printed step drops microbatch 0's `index_base = 0`).
  static DictionaryAttr attributesOf(Operation *op) {
    NamedAttrList list(op->getAttrDictionary());
    op->getName().populateDefaultAttrs(list);
    return list.getDictionary(op->getContext());
  }

  /// The built microbatches are alike, and their differing integer
  /// attributes lie on lines over the microbatch.
  LogicalResult compareGroups() {
    int last = groups.size() - 1;
    size_t count = groups[last].size();
    for (int k = 0; k < last; ++k)
      if (groups[k].size() != count)
        return step.emitOpError("has microbatches of different sizes: ")
               << groups[k].size() << " ops in microbatch " << k << " against "
               << count << " in microbatch " << last
               << "; loom-unroll-microbatches makes the step's other "
                  "microbatches from the last one built only when the "
                  "built ones are alike";
    stepped.resize(count);
    for (size_t i = 0; i < count; ++i) {
      Operation *op = groups[last][i];
      // (A region's ops would need comparing and renaming too; no pass
      // before this one makes any.)
      if (op->getNumRegions() > 0)
        return op->emitOpError("has regions; loom-unroll-microbatches makes "
                               "microbatches of ops without regions only");
      SmallVector<DictionaryAttr> dicts;
      for (int k = 0; k <= last; ++k)
        dicts.push_back(attributesOf(groups[k][i]));
      DictionaryAttr attrs = dicts[last];
      for (int k = 0; k < last; ++k) {
        Operation *other = groups[k][i];
        if (other->getName() != op->getName())
          return differ(k, i,
                        "'" + other->getName().getStringRef() + "' against '" +
                            op->getName().getStringRef() + "'");
        if (other->getNumOperands() != op->getNumOperands() ||
            other->getResultTypes() != op->getResultTypes() ||
            other->getNumRegions() != op->getNumRegions())
          return differ(k, i, "other operands, results or regions");
        for (auto [index, mine, theirs] :
             llvm::enumerate(op->getOperands(), other->getOperands())) {
          bool same = kindOf(mine) == last
                          ? theirs == counterpart(mine, k)
                          : kindOf(mine) == kShared && theirs == mine;
          if (!same)
            return differ(k, i,
                          "operand #" + Twine(index) + " is another value");
        }
        if (dicts[k].size() != attrs.size())
          return differ(k, i, "other attributes");
      }
      for (NamedAttribute attr : attrs) {
        SmallVector<Attribute> values;
        for (int k = 0; k <= last; ++k)
          values.push_back(
              withoutOrigin(dicts[k].get(attr.getName()), attr.getName()));
        if (llvm::all_equal(values))
          continue;
        SteppedAttr line{
            attr.getName(), isa<DenseI64ArrayAttr>(attr.getValue()), {}, {}};
        SmallVector<SmallVector<int64_t>> numbers;
        for (Attribute value : values) {
          std::optional<SmallVector<int64_t>> ints =
              value ? integers(value) : std::nullopt;
          if (!ints ||
              (!numbers.empty() && ints->size() != numbers[0].size())) {
            // (Name a microbatch whose value is not the last one's.)
            int k = 0;
            while (k < last && values[k] == values[last])
              ++k;
            return differ(k, i,
                          "attribute '" + attr.getName().getValue() +
                              "' differs, and not as an integer");
          }
          numbers.push_back(std::move(*ints));
        }
        for (size_t e = 0; e < numbers[0].size(); ++e) {
          int64_t base = numbers[0][e], delta = numbers[1][e] - base;
          for (int k = 2; k <= last; ++k)
            if (numbers[k][e] != base + k * delta) {
              std::string seen;
              llvm::raw_string_ostream os(seen);
              llvm::interleaveComma(numbers, os,
                                    [&](ArrayRef<int64_t> n) { os << n[e]; });
              return op->emitOpError("of microbatch ")
                     << last << " (op #" << i << " of each microbatch): its "
                     << "attribute '" << attr.getName().getValue() << "' is "
                     << seen << " in microbatches 0 to " << last
                     << ", which does not step evenly; "
                        "loom-unroll-microbatches cannot tell its value in "
                        "the other microbatches";
            }
          line.base.push_back(base);
          line.step.push_back(delta);
        }
        stepped[i].push_back(std::move(line));
      }
    }
    return success();
  }

  /// The sums over microbatches: every read of a microbatch's value from
  /// outside it is a term of a chain `add(add(v0, v1), v2) ...`.
  LogicalResult findSums() {
    int last = groups.size() - 1;
    llvm::SmallPtrSet<Operation *, 16> sumOps;
    for (Operation *op : ops) {
      if (kind[op] >= 0)
        continue;
      auto add = dyn_cast<AddOp>(op);
      if (!add || kindOf(add.getRhs()) != last)
        continue;
      // Walk the chain down to microbatch 0.
      SmallVector<AddOp> chain{add};
      Value term = add.getRhs();
      bool ok = true;
      for (int k = last - 1; k >= 0 && ok; --k) {
        Value sum = chain.back().getLhs();
        Value expected = counterpart(term, k);
        if (k == 0) {
          ok = sum == expected;
          break;
        }
        auto inner = sum.getDefiningOp<AddOp>();
        ok = inner && kind[inner] == kAfter && inner.getRhs() == expected &&
             inner->hasOneUse();
        if (ok)
          chain.push_back(inner);
      }
      if (!ok)
        return add.emitOpError("adds microbatch ")
               << last
               << "'s value to what is not the sum of the earlier "
                  "microbatches' counterparts; "
                  "loom-unroll-microbatches cannot extend it";
      for (AddOp link : chain)
        sumOps.insert(link);
      sums.push_back(add);
    }
    // Nothing else reads a microbatch's values from outside it.
    auto checkReader = [&](Operation *reader) -> LogicalResult {
      for (Value operand : reader->getOperands()) {
        int of = kindOf(operand);
        if (of < 0 || sumOps.contains(reader))
          continue;
        InFlightDiagnostic diag =
            reader->emitOpError("reads a value of microbatch ")
            << of
            << " but is no sum over the microbatches; "
               "loom-unroll-microbatches cannot make its counterparts "
               "for the other microbatches";
        diag.attachNote(operand.getLoc()) << "the value";
        return diag;
      }
      return success();
    };
    for (Operation *op : ops)
      if (kind[op] < 0 && failed(checkReader(op)))
        return failure();
    // Every gradient sum over microbatches gets the new terms.
    for (Operation *op : ops)
      if (op->hasAttr(LoomDialect::kGradientAccumulationAttrName) &&
          !sumOps.contains(op))
        return op->emitOpError("sums gradients over microbatches, but not "
                               "as a sum loom-unroll-microbatches extends "
                               "(its last term is no value of microbatch ")
               << last << ")";
    if (failed(checkReader(step.getBody().front().getTerminator())))
      return failure();
    // The last microbatch's ops and sums, in order (after partitioning,
    // bf16 gradients round each term between the sums).
    DenseMap<Operation *, size_t> sumIndex;
    for (auto [index, sum] : llvm::enumerate(sums))
      sumIndex[sum] = index;
    size_t first = position[groups.back().front()];
    for (Operation *op : ArrayRef(ops).drop_front(first)) {
      bool isSum = sumIndex.count(op);
      if (kind[op] != last && !isSum)
        continue;
      region.push_back({op, isSum ? int(sumIndex[op]) : -1});
      // The new microbatches go before this region: what it reads from
      // outside it must be made before.
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || kind[def] == last || position[def] < first)
          continue;
        InFlightDiagnostic diag =
            op->emitOpError("reads a value made after microbatch ")
            << last << " began; loom-unroll-microbatches cannot put the "
            << "other microbatches before the microbatch";
        diag.attachNote(def->getLoc()) << "the value";
        return diag;
      }
    }
    return success();
  }

  void setStepped(Operation *op, ArrayRef<SteppedAttr> lines, int64_t k,
                  OpBuilder &builder) {
    for (const SteppedAttr &line : lines) {
      SmallVector<int64_t> values;
      for (auto [base, delta] : llvm::zip(line.base, line.step))
        values.push_back(base + k * delta);
      if (line.array)
        op->setAttr(line.name, builder.getDenseI64ArrayAttr(values));
      else
        op->setAttr(line.name, builder.getI64IntegerAttr(values[0]));
    }
  }

  /// Microbatches L to total - 2 made before the last one built (L), whose
  /// ops and sums become microbatch total - 1's: the order building all of
  /// them would have given.
  void unroll() {
    int last = groups.size() - 1;
    OpBuilder builder(step.getContext());
    builder.setInsertionPoint(region.front().op);
    SmallVector<Value> running;
    for (AddOp sum : sums)
      running.push_back(sum.getLhs());
    for (int64_t k = last; k + 1 < total; ++k) {
      IRMapping mapping;
      for (auto [op, sum] : region) {
        if (sum >= 0) {
          auto add = cast<AddOp>(op);
          IRMapping terms;
          terms.map(add.getLhs(), running[sum]);
          terms.map(add.getRhs(), mapping.lookup(add.getRhs()));
          running[sum] = builder.clone(*op, terms)->getResult(0);
          continue;
        }
        Operation *clone = builder.clone(*op, mapping);
        setStepped(clone, stepped[indexInGroup[op]], k, builder);
      }
    }
    for (auto [op, sum] : region) {
      if (sum >= 0)
        cast<AddOp>(op).getLhsMutable().set(running[sum]);
      else
        setStepped(op, stepped[indexInGroup[op]], total - 1, builder);
    }
    step->removeAttr(LoomDialect::kPendingMicrobatchesAttrName);
  }

  func::FuncOp step;
  int64_t total;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, size_t> position;
  DenseMap<Operation *, int> kind;
  SmallVector<SmallVector<Operation *>> groups;
  DenseMap<Operation *, size_t> indexInGroup;
  /// Per op of the last microbatch, its attributes that step.
  SmallVector<SmallVector<SteppedAttr>> stepped;
  /// The last sum of each chain over the built microbatches.
  SmallVector<AddOp> sums;
  /// The last built microbatch's ops and sums (their index in `sums`) in
  /// the step's order.
  struct RegionOp {
    Operation *op;
    int sum;
  };
  SmallVector<RegionOp> region;
};

struct UnrollMicrobatchesPass
    : impl::LoomUnrollMicrobatchesBase<UnrollMicrobatchesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      auto total = func->getAttrOfType<IntegerAttr>(
          LoomDialect::kPendingMicrobatchesAttrName);
      if (!total)
        continue;
      if (func.isExternal() || !func.getBody().hasOneBlock()) {
        func.emitOpError("has ") << LoomDialect::kPendingMicrobatchesAttrName
                                 << " but no single block of ops to unroll";
        return signalPassFailure();
      }
      if (failed(MicrobatchUnroller(func, total.getInt()).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
