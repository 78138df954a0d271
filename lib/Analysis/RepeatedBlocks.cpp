//===- RepeatedBlocks.cpp - A model's repeated layers ---------------------===//
//
// Blocks are found in two steps. A hash of each operation alone (its name,
// attributes, result types, its operands' types and which are parameter reads)
// finds tandem repeats: periods p where operation i hashes like operation i + p
// over a long stretch. The wiring is then checked block by block against the
// last one: an operand that reads d blocks back at offset o must do so in every
// block (or read a value from before the run where there are fewer than d
// blocks before it), and any other operand must be the same value in every
// block, or a parameter read or constant in each. The last block must read
// the one before it: a sequence of layers, not a row of alike reads.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/RepeatedBlocks.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Attributes that differ between otherwise equal operations by design: a
/// dropout's seed is its own in every layer. (Folded models are compiled
/// for their costs, which these do not change.)
bool isPerInstance(StringRef name) { return name == "seed"; }

llvm::hash_code hashAlone(Operation *op) {
  llvm::hash_code hash = llvm::hash_value(op->getName().getAsOpaquePointer());
  // A constant's value is its block's own (LLaMA's rotary tables are one
  // resource per layer); what folding needs alike is its type.
  if (!op->hasTrait<OpTrait::ConstantLike>())
    for (NamedAttribute attribute : op->getAttrs())
      if (!isPerInstance(attribute.getName().strref()))
        hash =
            llvm::hash_combine(hash, attribute.getName().getAsOpaquePointer(),
                               attribute.getValue().getAsOpaquePointer());
  for (Type type : op->getResultTypes())
    hash = llvm::hash_combine(hash, type.getAsOpaquePointer());
  for (Value operand : op->getOperands()) {
    // A parameter read or not: the first block may read a function
    // argument where the others read the block before.
    bool parameter = bool(operand.getDefiningOp<ParamOp>());
    hash = llvm::hash_combine(hash, parameter,
                              operand.getType().getAsOpaquePointer());
  }
  return hash;
}

/// A value each block may have its own of: a parameter read or a constant
/// (canonicalization hoists every block's constants above the blocks).
bool isBlockOwn(Value value) {
  Operation *def = value.getDefiningOp();
  return def && (isa<ParamOp>(def) || def->hasTrait<OpTrait::ConstantLike>());
}

struct Candidate {
  size_t start, period, count;
};

/// Whether every block of `blocks` is wired like its last one.
bool wiredAlike(const RepeatedBlocks &blocks,
                const DenseMap<Operation *, size_t> &index) {
  const size_t p = blocks.period, last = blocks.count - 1;
  auto blockOf =
      [&](Operation *def) -> std::optional<std::pair<size_t, size_t>> {
    auto it = index.find(def);
    if (it == index.end() || it->second < blocks.start)
      return std::nullopt;
    size_t at = it->second - blocks.start;
    return std::make_pair(at / p, at % p);
  };
  // Layers in sequence: the last block reads the one before it.
  bool chained = false;
  for (size_t o = 0; o < p && !chained; ++o)
    for (Value operand : blocks.op(last, o)->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto place = blockOf(def); place && place->first + 1 == last)
          chained = true;
  if (!chained)
    return false;
  for (size_t o = 0; o < p; ++o) {
    Operation *reference = blocks.op(last, o);
    for (size_t j = 0; j < last; ++j) {
      Operation *op = blocks.op(j, o);
      // (The hashes matched; this rules out a collision.)
      if (op->getName() != reference->getName() ||
          op->getResultTypes() != reference->getResultTypes() ||
          op->getNumOperands() != reference->getNumOperands())
        return false;
      for (auto [value, expected] :
           llvm::zip(op->getOperands(), reference->getOperands())) {
        if (isBlockOwn(expected)) {
          if (!isBlockOwn(value))
            return false;
          continue;
        }
        Operation *def = expected.getDefiningOp();
        std::optional<std::pair<size_t, size_t>> place =
            def ? blockOf(def) : std::nullopt;
        if (!place) {
          // A value from before the run: the same in every block.
          if (value != expected)
            return false;
          continue;
        }
        size_t back = last - place->first;
        unsigned result = cast<OpResult>(expected).getResultNumber();
        if (j < back) {
          // Reads from before the run, as the first blocks do.
          Operation *own = value.getDefiningOp();
          if (own && blockOf(own))
            return false;
          continue;
        }
        Operation *own = blocks.op(j - back, place->second);
        if (value != own->getResult(result))
          return false;
      }
    }
  }
  return true;
}

} // namespace

std::optional<RepeatedBlocks>
mlir::loom::findRepeatedBlocks(func::FuncOp function) {
  if (function.isExternal())
    return std::nullopt;
  RepeatedBlocks blocks;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!isa<ParamOp>(op))
      blocks.ops.push_back(&op);
  const size_t n = blocks.ops.size();
  DenseMap<Operation *, size_t> index;
  std::vector<llvm::hash_code> hashes(n);
  for (size_t i = 0; i < n; ++i) {
    index[blocks.ops[i]] = i;
    hashes[i] = hashAlone(blocks.ops[i]);
  }
  // Every maximal stretch where operation i hashes like i + p, as
  // `count` whole blocks from its start.
  std::vector<Candidate> candidates;
  for (size_t p = 1; 3 * p <= n; ++p) {
    size_t i = 0;
    while (i + p < n) {
      if (hashes[i] != hashes[i + p]) {
        ++i;
        continue;
      }
      size_t a = i;
      while (i + p < n && hashes[i] == hashes[i + p])
        ++i;
      size_t count = (i - a + p) / p;
      if (count >= 3)
        candidates.push_back({a, p, count});
    }
  }
  // The most operations covered; then the shortest blocks.
  llvm::sort(candidates, [](const Candidate &x, const Candidate &y) {
    if (x.period * x.count != y.period * y.count)
      return x.period * x.count > y.period * y.count;
    return x.period < y.period;
  });
  for (const Candidate &candidate : candidates) {
    blocks.start = candidate.start;
    blocks.period = candidate.period;
    blocks.count = candidate.count;
    if (wiredAlike(blocks, index))
      return blocks;
  }
  return std::nullopt;
}

LogicalResult mlir::loom::foldRepeatedBlocks(const RepeatedBlocks &blocks,
                                             size_t keep, std::string &error) {
  if (keep == 0 || keep > blocks.count) {
    error = "cannot keep " + std::to_string(keep) + " of " +
            std::to_string(blocks.count) + " repeated blocks";
    return failure();
  }
  if (keep == blocks.count)
    return success();
  const size_t shift = blocks.count - keep;
  const size_t begin = blocks.start + keep * blocks.period,
               end = blocks.start + blocks.count * blocks.period;
  DenseMap<Operation *, size_t> removed;
  for (size_t i = begin; i < end; ++i)
    removed[blocks.ops[i]] = i;
  // What reads a deleted block from outside them reads the block `shift`
  // earlier, at the same offset.
  for (size_t i = begin; i < end; ++i) {
    Operation *op = blocks.ops[i];
    size_t block = (i - blocks.start) / blocks.period,
           offset = (i - blocks.start) % blocks.period;
    for (OpResult result : op->getResults()) {
      for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
        if (removed.count(use.getOwner()))
          continue;
        if (block < shift) {
          error = "an operation after the repeated blocks reads block " +
                  std::to_string(block) + ", which folding to " +
                  std::to_string(keep) + " does not keep";
          return failure();
        }
        use.set(blocks.op(block - shift, offset)
                    ->getResult(result.getResultNumber()));
      }
    }
  }
  for (size_t i = end; i-- > begin;)
    blocks.ops[i]->erase();
  // The parameters and constants only the deleted blocks read.
  auto function = blocks.ops.front()->getParentOfType<func::FuncOp>();
  auto module = function->getParentOfType<ModuleOp>();
  SmallVector<Operation *> reads;
  function.walk([&](Operation *op) {
    if (isa<ParamOp>(op) || op->hasTrait<OpTrait::ConstantLike>())
      reads.push_back(op);
  });
  for (Operation *read : reads)
    if (read->use_empty())
      read->erase();
  // The symbols still read, in one walk of the module (a walk per
  // parameter was quadratic: most of a folded compile's time).
  llvm::DenseSet<StringAttr> used;
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(&module.getBodyRegion()))
    for (const SymbolTable::SymbolUse &use : *uses)
      used.insert(use.getSymbolRef().getRootReference());
  SmallVector<ParameterOp> parameters(module.getOps<ParameterOp>());
  for (ParameterOp parameter : parameters)
    if (!used.contains(parameter.getSymNameAttr()))
      parameter.erase();
  return success();
}
