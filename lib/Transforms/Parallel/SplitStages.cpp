//===- SplitStages.cpp - One program per pipeline rank, in schedule order -===//
//
// The training step arrives as one function whose forward and backward ops
// carry their pipeline stage (loom-cut-stages, loom-autodiff) and
// microbatch (loom-build-train-step). This pass makes it one function per
// pipeline rank (`loom.ranks`): each op goes to the rank of its stage, the
// values that cross ranks become tagged sends and receives, and each
// rank's ops run in the order of its actions in the module's schedule
// (F, B and W of each stage and microbatch). Where everything else goes
// (docs/design/pipeline.md):
//   - parameter reads, constants and pure work on them and on the step's
//     arguments are replicated: every rank that needs them computes them;
//   - a parameter's update runs on every stage that reads the parameter
//     (two for a tied embedding and head), each with the same gradient, so
//     the copies stay equal;
//   - the rest (gradient sums over microbatches, the clipping norm, loss
//     sums) runs where its largest operand lives, as soon as its operands
//     are there; smaller operands (scalars) travel to it.
// Sends are posted where their value is made, receives just before the op
// that first reads them; the runtime waits for a receive only where its
// bytes are read, and never for a send, as the schedule's proof assumes.
//
//===----------------------------------------------------------------------===//

#include "ScheduleAttr.h"

#include "loom/Analysis/StageCuts.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <map>
#include <set>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSPLITSTAGES
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// A value that one rank makes and another reads.
struct Transfer {
  Value value;
  /// Where the value is made (its op moves to its rank's function, with
  /// its action in the location, before some receives are made).
  Location loc;
  int source, target;
  int64_t tag;
  /// The slot and the step position of its first reader on the target.
  int slot;
  size_t position;
};

class StageSplitter {
public:
  StageSplitter(func::FuncOp step, const PipelineSchedule &schedule,
                int sharedCores)
      : step(step), schedule(schedule),
        splitsBackward(schedule.splitsBackward()), sharedCores(sharedCores),
        end(0), ranks(schedule.ranks) {}

  LogicalResult run() {
    Block &body = step.getBody().front();
    // (Sized once: a 64-microbatch step has half a million ops.)
    size_t count = body.getOperations().size();
    ops.reserve(count);
    index.reserve(count);
    for (Operation &op : body.without_terminator()) {
      index[&op] = ops.size();
      ops.push_back(&op);
    }
    info.resize(ops.size());
    for (const std::vector<PipelineAction> &list : schedule.actions) {
      int computes = 0;
      for (const PipelineAction &action : list)
        computes += action.isCompute();
      end = std::max(end, computes);
    }
    if (failed(classify()) || failed(placeTail()))
      return failure();
    splitWeightGradients();
    if (failed(assignSlots()))
      return failure();
    // Predicted from the step, reported once the split succeeded.
    std::string prediction = predict();
    Location loc = step.getLoc();
    findTransfers();
    if (failed(build()))
      return failure();
    mlir::emitRemark(loc, prediction);
    return success();
  }

private:
  struct Staged {
    int stage, microbatch;
    bool backward;
  };
  /// The stages an op runs on. (Most run on one: two inline, not twelve,
  /// for half a million ops.)
  using Stages = SmallVector<int, 2>;

  /// What the split knows of an op of the step.
  struct OpInfo {
    /// Its action's stage and microbatch, for a staged op (`stage` < 0
    /// for the others).
    Staged where = {-1, -1, false};
    /// Computed on every rank that reads it (parameters, constants, pure
    /// work on them and on the step's arguments).
    bool replicated = false;
    /// A backward op the input gradient needs (B, not W).
    bool inputGradient = false;
    Stages stages;
    /// (rank, slot) of every placement, by rank.
    SmallVector<std::pair<int, int>, 1> slots;
    /// A staged op's action, as formatPipelineAction writes it.
    StringAttr action;

    bool isStaged() const { return where.stage >= 0; }
  };

  const OpInfo *infoOf(Operation *op) const {
    auto it = index.find(op);
    return it == index.end() ? nullptr : &info[it->second];
  }

  const Staged *stagedOf(Operation *op) const {
    const OpInfo *opInfo = infoOf(op);
    return opInfo && opInfo->isStaged() ? &opInfo->where : nullptr;
  }

  bool isReplicated(Operation *op) const {
    const OpInfo *opInfo = infoOf(op);
    return opInfo && opInfo->replicated;
  }

  const Stages &stagesOf(Operation *op) const {
    static const Stages none;
    const OpInfo *opInfo = infoOf(op);
    return opInfo ? opInfo->stages : none;
  }

  int rankOf(int stage) const { return schedule.rankOf(stage); }

  /// The action of an unstaged op whose operands, but replicated ones, all
  /// come from one stage and microbatch: its backward if one of them does
  /// (a forward value meeting a gradient), else its forward. Neither
  /// updates nor stores, which go where their parameter is.
  std::optional<Staged> commonAction(Operation *op) const {
    if (isa<SGDUpdateOp, AdamWUpdateOp, AssignOp>(op))
      return std::nullopt;
    std::optional<Staged> common;
    for (Value operand : op->getOperands()) {
      if (isReplicated(operand))
        continue;
      const Staged *found = stagedOf(operand.getDefiningOp());
      if (!found)
        return std::nullopt;
      const Staged &where = *found;
      if (common && (common->stage != where.stage ||
                     common->microbatch != where.microbatch))
        return std::nullopt;
      bool backward = where.backward || (common && common->backward);
      common = where;
      common->backward = backward;
    }
    return common;
  }

  /// The parameters that `op`'s results are stored into, through any ops.
  static SmallVector<Attribute> storedFrom(Operation *op) {
    SmallVector<Attribute> names;
    SmallVector<Operation *> work{op};
    llvm::SmallPtrSet<Operation *, 8> seen;
    while (!work.empty()) {
      Operation *at = work.pop_back_val();
      for (Operation *user : at->getUsers()) {
        if (!seen.insert(user).second)
          continue;
        if (auto assign = dyn_cast<AssignOp>(user))
          names.push_back(assign.getNameAttr().getAttr());
        else
          work.push_back(user);
      }
    }
    return names;
  }

  bool isReplicated(Value value) const {
    Operation *def = value.getDefiningOp();
    return !def || isReplicated(def);
  }

  /// Replicated ops, the staged ops' stages, and which stages read each
  /// parameter.
  LogicalResult classify() {
    int lastStage = -1;
    for (auto [position, op] : llvm::enumerate(ops)) {
      OpInfo &opInfo = info[position];
      auto stage = op->getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName);
      // (A collective on replicated values, such as ZeRO-3's gather of a
      // parameter, runs on every stage that reads it, within the stage.)
      if (isa<ParamOp, ConstantOp>(op) ||
          (!stage &&
           (isMemoryEffectFree(op) ||
            isa<AllReduceOp, AllGatherOp, ReduceScatterOp,
                CollectiveBroadcastOp, AllToAllOp>(op)) &&
           llvm::all_of(op->getOperands(),
                        [&](Value v) { return isReplicated(v); }))) {
        opInfo.replicated = true;
        continue;
      }
      if (!stage) {
        // What partitioning and the step add inside one action (a tensor-
        // parallel all-reduce, a gradient's rounding) belongs to it.
        if (std::optional<Staged> action = commonAction(op)) {
          opInfo.where = *action;
          opInfo.stages = {action->stage};
        }
        continue;
      }
      auto microbatch =
          op->getAttrOfType<IntegerAttr>(LoomDialect::kMicrobatchAttrName);
      if (stage.getInt() >= schedule.stages)
        return op->emitOpError("is on pipeline stage ")
               << stage.getInt() << ", but the schedule has " << schedule.stages
               << " stages";
      if (!microbatch)
        return op->emitOpError("has a pipeline stage but no microbatch "
                               "(loom-build-train-step gives staged ops "
                               "theirs)");
      if (microbatch.getInt() >= schedule.microbatches)
        return op->emitOpError("is in microbatch ")
               << microbatch.getInt() << ", but the schedule has "
               << schedule.microbatches;
      int s = int(stage.getInt());
      opInfo.where = {s, int(microbatch.getInt()),
                      op->hasAttr(LoomDialect::kBackwardAttrName)};
      opInfo.stages = {s};
      lastStage = std::max(lastStage, s);
    }
    if (lastStage + 1 != schedule.stages)
      return step.emitOpError("has ")
             << lastStage + 1 << " pipeline stages, but the schedule has "
             << schedule.stages;
    // The parameters each replicated value reads, and the stages whose
    // forward or backward reads them.
    // (Kept only where there are some: most replicated ops are
    // constants.)
    for (auto [position, op] : llvm::enumerate(ops)) {
      if (!info[position].replicated)
        continue;
      llvm::SetVector<Attribute> names;
      if (auto param = dyn_cast<ParamOp>(op))
        names.insert(param.getNameAttr().getAttr());
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp()) {
          ArrayRef<Attribute> read = parametersRead(def);
          names.insert(read.begin(), read.end());
        }
      if (!names.empty())
        parametersOf[op] = std::move(names);
    }
    for (auto [position, op] : llvm::enumerate(ops)) {
      if (!info[position].isStaged())
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && isReplicated(def))
          for (Attribute name : parametersRead(def))
            readers[name].insert(info[position].where.stage);
    }
    return success();
  }

  /// The parameters a replicated op's value is computed from.
  ArrayRef<Attribute> parametersRead(Operation *op) const {
    auto it = parametersOf.find(op);
    if (it == parametersOf.end())
      return {};
    return it->second.getArrayRef();
  }

  /// The stages of `op`'s operands but replicated ones, when they are the
  /// same several stages for all of them.
  std::optional<Stages> sharedStages(Operation *op) const {
    std::optional<Stages> common;
    for (Value operand : op->getOperands()) {
      if (isReplicated(operand))
        continue;
      Stages where = stagesOf(operand.getDefiningOp());
      if (common && *common != where)
        return std::nullopt;
      common = std::move(where);
    }
    if (!common || common->size() < 2)
      return std::nullopt;
    return common;
  }

  /// The stages of the ops that are neither staged nor replicated.
  LogicalResult placeTail() {
    SmallVector<AssignOp> replicatedStores;
    for (auto [position, op] : llvm::enumerate(ops)) {
      OpInfo &opInfo = info[position];
      if (opInfo.replicated || opInfo.isStaged())
        continue;
      if (isa<SGDUpdateOp, AdamWUpdateOp>(op)) {
        // (ZeRO updates a shard: a slice of the parameter read.)
        Stages where;
        if (Operation *def = op->getOperand(0).getDefiningOp();
            def && isReplicated(def) && !parametersRead(def).empty()) {
          std::set<int> set = readers[parametersRead(def).front()];
          // A master that only its update reads (ZeRO's sharded f32 master
          // under mixed precision): where the parameters it stores into
          // (its bf16 copy) are read.
          if (set.empty())
            for (Attribute stored : storedFrom(op))
              set.insert(readers[stored].begin(), readers[stored].end());
          where.assign(set.begin(), set.end());
        }
        if (where.empty())
          return op->emitOpError("updates a parameter that no pipeline "
                                 "stage reads");
        opInfo.stages = where;
        continue;
      }
      if (auto assign = dyn_cast<AssignOp>(op)) {
        if (isReplicated(assign.getValue()))
          replicatedStores.push_back(assign);
        else
          opInfo.stages = stagesOf(assign.getValue().getDefiningOp());
        continue;
      }
      // What follows a parameter's update on several stages (a tied
      // parameter's: ZeRO's gather of the updated shard, a bf16 copy) runs
      // on each of them, so that every stage's copy is stored.
      if (std::optional<Stages> shared = sharedStages(op)) {
        opInfo.stages = std::move(*shared);
        continue;
      }
      // Where the largest operand is (ties: the later stage).
      Value largest;
      int64_t largestSize = -1;
      for (Value operand : op->getOperands()) {
        if (isReplicated(operand))
          continue;
        auto type = dyn_cast<ShapedType>(operand.getType());
        int64_t size =
            type && type.hasStaticShape() ? type.getNumElements() : 1;
        int stage = stagesOf(operand.getDefiningOp()).back();
        if (size > largestSize ||
            (size == largestSize &&
             stage > stagesOf(largest.getDefiningOp()).back())) {
          largest = operand;
          largestSize = size;
        }
      }
      if (!largest)
        return op->emitOpError("has side effects and reads no staged value, "
                               "so no pipeline stage runs it");
      int stage = stagesOf(largest.getDefiningOp()).back();
      opInfo.stages = {stage};
    }
    // A replicated value's store (the update count) is on every stage that
    // reads the parameter.
    for (AssignOp assign : replicatedStores) {
      std::set<int> where;
      for (auto [position, op] : llvm::enumerate(ops)) {
        const Stages &opStages = info[position].stages;
        if (op == assign.getOperation() || opStages.empty())
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && isReplicated(def) &&
              llvm::is_contained(parametersRead(def),
                                 assign.getNameAttr().getAttr()))
            where.insert(opStages.begin(), opStages.end());
      }
      if (where.empty())
        for (int s = 0; s < schedule.stages; ++s)
          where.insert(s);
      info[index.lookup(assign)].stages = Stages(where.begin(), where.end());
    }
    return success();
  }

  /// With W actions, a backward op belongs to B when the input gradient
  /// (what leaves for another stage) needs it, and to W otherwise.
  void splitWeightGradients() {
    if (!splitsBackward)
      return;
    SmallVector<Operation *> work;
    for (auto [position, op] : llvm::enumerate(ops)) {
      const OpInfo &opInfo = info[position];
      if (!opInfo.isStaged() || !opInfo.where.backward)
        continue;
      for (Operation *user : op->getUsers()) {
        const Staged *found = stagedOf(user);
        if (found && found->stage != opInfo.where.stage) {
          work.push_back(op);
          break;
        }
      }
    }
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      OpInfo &opInfo = info[index.lookup(op)];
      if (opInfo.inputGradient)
        continue;
      opInfo.inputGradient = true;
      const Staged &where = opInfo.where;
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        const Staged *found = stagedOf(def);
        if (found && found->backward && found->stage == where.stage &&
            found->microbatch == where.microbatch)
          work.push_back(def);
      }
    }
  }

  /// The position of each op among its rank's work: its action's index
  /// for staged ops; as early as its operands allow for the rest (`end` if
  /// one comes from another rank); stores last; replicated ops just before
  /// their first reader.
  LogicalResult assignSlots() {
    std::vector<std::map<std::tuple<int, int, int>, int>> actionSlot(ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      int slot = 0;
      for (const PipelineAction &action : schedule.actions[rank])
        if (action.isCompute())
          actionSlot[rank][{int(action.kind), action.stage,
                            action.microbatch}] = slot++;
    }
    for (auto [position, op] : llvm::enumerate(ops)) {
      OpInfo &opInfo = info[position];
      if (opInfo.replicated)
        continue;
      if (opInfo.isStaged()) {
        const Staged &where = opInfo.where;
        PipelineActionKind kind = !where.backward ? PipelineActionKind::Forward
                                  : splitsBackward && !opInfo.inputGradient
                                      ? PipelineActionKind::Weight
                                      : PipelineActionKind::Backward;
        int rank = rankOf(where.stage);
        auto found =
            actionSlot[rank].find({int(kind), where.stage, where.microbatch});
        if (found == actionSlot[rank].end())
          return op->emitOpError("belongs to action ")
                 << formatPipelineAction({kind, where.stage, where.microbatch})
                 << ", which rank " << rank << "'s schedule does not list";
        setSlot(opInfo, rank, found->second);
        // (One name per action: a 64-microbatch step has half a million
        // staged ops.)
        StringAttr &name =
            actionNames[{int(kind), where.stage, where.microbatch}];
        if (!name)
          name = StringAttr::get(
              op->getContext(),
              formatPipelineAction({kind, where.stage, where.microbatch}));
        opInfo.action = name;
        continue;
      }
      for (int rank : ranksOf(opInfo)) {
        int slot = 0;
        if (isa<AssignOp>(op)) {
          slot = end + 1;
        } else {
          for (Value operand : op->getOperands()) {
            if (isReplicated(operand))
              continue;
            std::optional<int> local = slotOf(operand.getDefiningOp(), rank);
            slot = std::max(slot, local ? *local : end);
          }
        }
        setSlot(opInfo, rank, slot);
      }
    }
    // Replicated ops, readers first.
    for (size_t position = ops.size(); position-- > 0;) {
      Operation *op = ops[position];
      if (!info[position].replicated)
        continue;
      std::map<int, int> first;
      for (Operation *user : op->getUsers()) {
        if (isa<func::ReturnOp>(user)) {
          int rank = rankOf(schedule.stages - 1);
          first[rank] = first.count(rank) ? std::min(first[rank], end) : end;
          continue;
        }
        for (auto [key, slot] : slotsOf(user))
          first[key] = first.count(key) ? std::min(first[key], slot) : slot;
      }
      for (auto [rank, slot] : first)
        setSlot(info[position], rank, slot);
    }
    return success();
  }

  static double bytesOf(Type type) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasStaticShape())
      return 0;
    unsigned bits = shaped.getElementType().isIntOrFloat()
                        ? shaped.getElementType().getIntOrFloatBitWidth()
                        : 32;
    return double(shaped.getNumElements()) * ((bits + 7) / 8);
  }

  /// The schedule replayed with the cost model's time of each stage's F, B
  /// and W (the ops of microbatch 0: each does the same work) and the
  /// activations its forward keeps for its backward, as the remark the pass
  /// reports (loom-run prints it before any rank starts).
  std::string predict() {
    int count = schedule.stages;
    PipelineStageCosts costs;
    for (std::vector<double> *list : {&costs.forward, &costs.backward,
                                      &costs.weight, &costs.activationBytes})
      list->assign(count, 0);
    StageCostRates rates;
    for (auto [position, op] : llvm::enumerate(ops)) {
      const OpInfo &opInfo = info[position];
      const Staged &where = opInfo.where;
      if (!opInfo.isStaged() || where.microbatch != 0)
        continue;
      double seconds = estimateOpSeconds(op, rates);
      if (!where.backward) {
        costs.forward[where.stage] += seconds;
        for (Value result : op->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                const Staged *found = stagedOf(user);
                return found && found->backward;
              }))
            costs.activationBytes[where.stage] += bytesOf(result.getType());
      } else if (splitsBackward && !opInfo.inputGradient) {
        costs.weight[where.stage] += seconds;
      } else {
        costs.backward[where.stage] += seconds;
      }
    }
    costs.cores = sharedCores;
    PipelineSimulation simulation = simulateSchedule(schedule, costs);
    std::string text;
    llvm::raw_string_ostream remark(text);
    remark << "pipeline " << schedule.kind << " on " << schedule.ranks
           << " ranks, " << schedule.microbatches << " microbatches"
           << (sharedCores > 0 && sharedCores < schedule.ranks
                   ? " sharing " + std::to_string(sharedCores) + " cores"
                   : std::string())
           << " (cost model): step "
           << llvm::format("%.3g", simulation.stepTime * 1e3) << " ms, bubble "
           << llvm::format("%.1f", simulation.bubbleFraction * 100) << "% ("
           << llvm::format("%.1f", simulation.actionBubbleFraction * 100)
           << "% between each rank's first and last action, as a trace "
              "measures it); per stage, forward/backward"
           << (splitsBackward ? "/weight" : "") << " ms and peak activations:";
    for (int s = 0; s < count; ++s) {
      remark << (s ? "," : "") << " s" << s << " "
             << llvm::format("%.3g/%.3g", costs.forward[s] * 1e3,
                             costs.backward[s] * 1e3);
      if (splitsBackward)
        remark << llvm::format("/%.3g", costs.weight[s] * 1e3);
      remark << " ms, " << simulation.peakMicrobatches[s] << " x "
             << formatBytes(costs.activationBytes[s]);
    }
    return text;
  }

  /// (rank, slot) of every placement of `op`, by rank.
  ArrayRef<std::pair<int, int>> slotsOf(Operation *op) const {
    const OpInfo *opInfo = infoOf(op);
    if (!opInfo)
      return {};
    return opInfo->slots;
  }

  std::optional<int> slotOf(Operation *op, int rank) const {
    for (auto [where, slot] : slotsOf(op))
      if (where == rank)
        return slot;
    return std::nullopt;
  }

  static void setSlot(OpInfo &opInfo, int rank, int slot) {
    SmallVector<std::pair<int, int>, 1> &list = opInfo.slots;
    auto it = llvm::lower_bound(list, std::make_pair(rank, INT_MIN));
    if (it != list.end() && it->first == rank)
      it->second = slot;
    else
      list.insert(it, {rank, slot});
  }

  /// The ranks of `op`'s stages, each once, in the stages' order.
  SmallVector<int, 2> ranksOf(const OpInfo &opInfo) const {
    SmallVector<int, 2> result;
    for (int stage : opInfo.stages)
      if (!llvm::is_contained(result, rankOf(stage)))
        result.push_back(rankOf(stage));
    return result;
  }

  /// The values read on a rank that does not make them.
  void findTransfers() {
    std::map<std::pair<int, int>, int64_t> nextTag;
    int lastRank = rankOf(schedule.stages - 1);
    for (auto [position, op] : llvm::enumerate(ops)) {
      if (info[position].replicated)
        continue;
      SmallVector<int, 2> sources = ranksOf(info[position]);
      for (Value value : op->getResults()) {
        // Rank -> (slot, position) of its first reader. (Most values are
        // read on their own rank only: no container per value.)
        SmallVector<std::pair<int, std::pair<int, size_t>>, 2> targets;
        auto reach = [&](int rank, int slot, size_t position) {
          if (llvm::is_contained(sources, rank))
            return;
          std::pair<int, size_t> at{slot, position};
          for (auto &[target, first] : targets)
            if (target == rank) {
              first = std::min(first, at);
              return;
            }
          targets.push_back({rank, at});
        };
        for (OpOperand &use : value.getUses()) {
          Operation *user = use.getOwner();
          if (isa<func::ReturnOp>(user)) {
            reach(lastRank, end, ops.size());
            continue;
          }
          size_t userPosition = index.lookup(user);
          for (auto [rank, slot] : info[userPosition].slots)
            reach(rank, slot, userPosition);
        }
        llvm::sort(targets, [](const auto &a, const auto &b) {
          return a.first < b.first;
        });
        for (auto [target, at] : targets) {
          int source = sources.front();
          transfers.push_back({value, value.getLoc(), source, target,
                               nextTag[{source, target}]++, at.first,
                               at.second});
        }
      }
    }
  }

  /// What a rank does, in order: its ops, each receive just before its
  /// first reader (each op's sends follow it).
  struct Item {
    int slot;
    size_t position;
    int order; // 0 for receives, 1 for ops
    Operation *op;
    const Transfer *receive;
  };

  /// Every rank's items, in one walk over the ops.
  std::vector<std::vector<Item>> itemsOfRanks() {
    std::vector<std::vector<Item>> items(ranks);
    for (auto [position, op] : llvm::enumerate(ops))
      for (auto [rank, slot] : info[position].slots)
        items[rank].push_back({slot, position, 1, op, nullptr});
    for (const Transfer &transfer : transfers)
      items[transfer.target].push_back(
          {transfer.slot, transfer.position, 0, nullptr, &transfer});
    for (std::vector<Item> &list : items)
      std::stable_sort(list.begin(), list.end(),
                       [](const Item &a, const Item &b) {
                         return std::tie(a.slot, a.position, a.order) <
                                std::tie(b.slot, b.position, b.order);
                       });
    return items;
  }

  /// Replays the ranks' programs with receives that block until their send
  /// is posted (sends never wait): the runtime's semantics, so a program
  /// that would hang is an error here, naming who waits for whom.
  LogicalResult checkProgress(const std::vector<std::vector<Item>> &items) {
    std::multimap<Operation *, const Transfer *> sendsOf;
    for (const Transfer &transfer : transfers)
      sendsOf.insert({transfer.value.getDefiningOp(), &transfer});
    std::set<const Transfer *> posted;
    std::vector<size_t> next(ranks, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int rank = 0; rank < ranks; ++rank) {
        const std::vector<Item> &list = items[rank];
        for (; next[rank] < list.size(); ++next[rank], progress = true) {
          const Item &item = list[next[rank]];
          if (item.receive && !posted.count(item.receive))
            break;
          if (item.op) {
            auto [first, last] = sendsOf.equal_range(item.op);
            for (auto it = first; it != last; ++it)
              if (it->second->source == rank)
                posted.insert(it->second);
          }
        }
      }
    }
    int waiting = -1;
    for (int rank = 0; rank < ranks && waiting < 0; ++rank)
      if (next[rank] < items[rank].size())
        waiting = rank;
    if (waiting < 0)
      return success();
    std::string chain;
    llvm::raw_string_ostream os(chain);
    std::set<int> seen;
    for (int rank = waiting; seen.insert(rank).second;) {
      const Transfer &t = *items[rank][next[rank]].receive;
      os << (rank == waiting ? "rank " : ", which is made after rank ") << rank
         << (rank == waiting ? " waits at its" : "'s") << " receive of tag "
         << t.tag << " from rank " << t.source;
      rank = t.source;
      if (next[rank] >= items[rank].size())
        break;
    }
    return step->getParentOfType<ModuleOp>().emitError()
           << "loom-split-stages: the ranks' programs would wait on each "
              "other: "
           << chain;
  }

  static bool isActionMark(StringAttr name) {
    return name == LoomDialect::kStageAttrName ||
           name == LoomDialect::kMicrobatchAttrName ||
           name == LoomDialect::kBackwardAttrName;
  }

  /// Each rank's program has every value where it reads it (made before
  /// on the rank, received, or an argument) and the last stage's rank the
  /// results: checked before anything is built, so that a failure leaves
  /// the step as it was.
  LogicalResult checkValues(const std::vector<std::vector<Item>> &items) {
    auto returnOp =
        cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (int rank = 0; rank < ranks; ++rank) {
      llvm::DenseSet<Value> there(step.getArguments().begin(),
                                  step.getArguments().end());
      for (const Item &item : items[rank]) {
        if (item.receive) {
          there.insert(item.receive->value);
          continue;
        }
        for (Value operand : item.op->getOperands()) {
          if (there.contains(operand))
            continue;
          auto describe = [&](Operation *op) {
            const OpInfo *opInfo = infoOf(op);
            return !opInfo || !opInfo->action
                       ? std::string("outside the actions")
                       : "in " + opInfo->action.str();
          };
          InFlightDiagnostic diag =
              item.op->emitOpError("runs on rank ")
              << rank << " (" << describe(item.op)
              << ") before a value it reads: the schedule orders its "
                 "action before the one making it";
          diag.attachNote(operand.getLoc())
              << "made here (" << describe(operand.getDefiningOp()) << ")";
          return diag;
        }
        there.insert(item.op->result_begin(), item.op->result_end());
      }
      if (rank == rankOf(schedule.stages - 1))
        for (Value value : returnOp.getOperands())
          if (!there.contains(value))
            return returnOp.emitOpError("returns a value rank ")
                   << rank << " does not have";
    }
    return success();
  }

  /// `attr` (lists of world ranks) with every rank moved by `offset`, once
  /// per list and offset (a stage's collectives share a few lists: made
  /// anew for each, they were a sixth of the pass).
  ArrayAttr offsetRanks(ArrayAttr attr, int64_t offset) {
    auto [it, isNew] = offsetRankLists.try_emplace({attr, offset});
    if (isNew)
      it->second = makeOffsetRanks(attr, offset);
    return it->second;
  }
  static ArrayAttr makeOffsetRanks(ArrayAttr attr, int64_t offset) {
    SmallVector<Attribute> lists;
    for (Attribute list : attr) {
      SmallVector<int64_t> ranks(cast<DenseI64ArrayAttr>(list).asArrayRef());
      for (int64_t &rank : ranks)
        rank += offset;
      lists.push_back(DenseI64ArrayAttr::get(attr.getContext(), ranks));
    }
    return ArrayAttr::get(attr.getContext(), lists);
  }

  static bool isRankLists(Attribute attr) {
    auto array = dyn_cast_or_null<ArrayAttr>(attr);
    return array && llvm::all_of(array, llvm::IsaPred<DenseI64ArrayAttr>);
  }

  /// For each transfer a -> b, a later transfer b -> a that b sends only
  /// after it read the first one's data, and a receives after it sent it:
  /// once a has waited for that one, the first has completed, and its
  /// buffer may be reused (the send's `released_by`). The earliest such on
  /// a, so that 1F1B's sent activations live until their gradient comes
  /// back rather than to the end of the step.
  std::map<const Transfer *, int64_t>
  releases(const std::vector<std::vector<Item>> &items) {
    // Per rank: where each op and each receive is in its list.
    std::vector<llvm::DenseMap<Operation *, size_t>> opAt(ranks);
    std::vector<std::map<const Transfer *, size_t>> receiveAt(ranks);
    for (int rank = 0; rank < ranks; ++rank)
      for (auto [at, item] : llvm::enumerate(items[rank])) {
        if (item.op)
          opAt[rank][item.op] = at;
        else
          receiveAt[rank][item.receive] = at;
      }
    std::map<std::pair<int, int>, std::vector<const Transfer *>> channels;
    for (const Transfer &t : transfers)
      channels[{t.source, t.target}].push_back(&t);
    std::map<const Transfer *, int64_t> released;
    for (const Transfer &t : transfers) {
      int a = t.source, b = t.target;
      size_t sentAt = opAt[a].lookup(t.value.getDefiningOp());
      size_t readAt = receiveAt[b][&t];
      const Transfer *best = nullptr;
      size_t bestAt = 0;
      for (const Transfer *u : channels[{b, a}]) {
        size_t madeAt = opAt[b].lookup(u->value.getDefiningOp());
        size_t backAt = receiveAt[a][u];
        if (madeAt > readAt && backAt > sentAt && (!best || backAt < bestAt)) {
          best = u;
          bestAt = backAt;
        }
      }
      if (best)
        released[&t] = best->tag;
    }
    return released;
  }

  /// One function per rank, its ops in slot order.
  LogicalResult build() {
    auto module = step->getParentOfType<ModuleOp>();
    // The step may already be SPMD over G ranks (tp, dp): each pipeline
    // rank is then a group of G world ranks, r * G + j, running its
    // stages' SPMD program; device j of one stage talks to device j of
    // the next.
    int64_t group = LoomDialect::getWorldSize(module);
    if (LoomDialect::getRanksOf(step) !=
        llvm::to_vector(llvm::seq<int64_t>(0, group)))
      return step.emitOpError("already runs on some ranks only "
                              "(loom.ranks); loom-split-stages splits a "
                              "step that runs on all of them");
    std::vector<std::vector<Item>> items = itemsOfRanks();
    if (failed(checkProgress(items)) || failed(checkValues(items)))
      return failure();
    std::map<const Transfer *, int64_t> releasedBy = releases(items);
    // Each op is cloned into the functions of all but the last rank that
    // runs it, and moved into that one's (most run on one rank only):
    // cloning every op and erasing the step was a third of the pass.
    std::vector<int> lastRankAt(ops.size(), -1);
    for (int rank = 0; rank < ranks; ++rank)
      for (const Item &item : items[rank])
        if (item.op)
          lastRankAt[item.position] = rank;
    // Each op's sends, by its position.
    llvm::DenseMap<size_t, SmallVector<const Transfer *, 1>> sendsAt;
    for (const Transfer &transfer : transfers)
      sendsAt[index.lookup(transfer.value.getDefiningOp())].push_back(
          &transfer);
    // Whether ops of a kind can name ranks (collectives' groups, sends'
    // and receives' pairs), asked once per kind.
    llvm::DenseMap<OperationName, bool> namesRanks;
    auto mayNameRanks = [&](Operation *op) {
      auto [it, isNew] = namesRanks.try_emplace(op->getName(), false);
      if (isNew)
        for (StringAttr name : op->getName().getAttributeNames())
          it->second |= name == "groups" || name == "pairs";
      return it->second || !op->getDiscardableAttrDictionary().empty();
    };
    OpBuilder builder(step);
    int lastRank = rankOf(schedule.stages - 1);
    auto returnOp =
        cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (int rank = 0; rank < ranks; ++rank) {
      bool returns = rank == lastRank;
      auto type =
          FunctionType::get(step.getContext(), step.getArgumentTypes(),
                            returns ? step.getResultTypes() : TypeRange());
      auto func = builder.create<func::FuncOp>(
          step.getLoc(), (step.getSymName() + "_rank" + Twine(rank)).str(),
          type);
      for (unsigned i = 0; i < step.getNumArguments(); ++i)
        func.setArgAttrs(i, step.getArgAttrDict(i));
      if (returns)
        for (unsigned i = 0; i < step.getNumResults(); ++i)
          func.setResultAttrs(i, step.getResultAttrDict(i));
      func->setAttr(LoomDialect::kRanksAttrName,
                    builder.getDenseI64ArrayAttr(llvm::to_vector(
                        llvm::seq<int64_t>(rank * group, (rank + 1) * group))));
      Block *block = func.addEntryBlock();
      OpBuilder body = OpBuilder::atBlockEnd(block);
      IRMapping mapping;
      mapping.map(step.getArguments(), block->getArguments());
      auto pair = [&](const Transfer &t) {
        SmallVector<Attribute> pairs;
        for (int64_t j = 0; j < group; ++j)
          pairs.push_back(builder.getDenseI64ArrayAttr(
              {t.source * group + j, t.target * group + j}));
        return builder.getArrayAttr(pairs);
      };
      for (const Item &item : items[rank]) {
        if (item.receive) {
          const Transfer &t = *item.receive;
          Value received = body.create<RecvOp>(
              t.loc, t.value.getType(), pair(t), body.getI64IntegerAttr(t.tag));
          mapping.map(t.value, received);
          continue;
        }
        // (checkValues made sure every operand is there.)
        Operation *clone = item.op;
        if (lastRankAt[item.position] == rank &&
            item.op->getNumRegions() == 0) {
          // Its results need no mapping: this rank reads them as they are
          // (a value is received only on a rank that does not make it).
          clone->moveBefore(block, block->end());
          for (OpOperand &operand : clone->getOpOperands())
            if (Value mapped = mapping.lookupOrNull(operand.get()))
              operand.set(mapped);
        } else {
          clone = body.clone(*item.op, mapping);
        }
        // The stage, microbatch and backward marks are the action's now;
        // dropped in one go (each removal rebuilds the op's dictionary).
        // (Ops share their few dictionaries: each is filtered once.)
        DictionaryAttr marks = clone->getDiscardableAttrDictionary();
        auto [unmarked, isNew] = unmarkedOf.try_emplace(marks);
        if (isNew) {
          NamedAttrList kept;
          for (NamedAttribute attr : marks)
            if (!isActionMark(attr.getName()))
              kept.push_back(attr);
          unmarked->second = kept.getAttrs().size() == marks.size()
                                 ? marks
                                 : kept.getDictionary(clone->getContext());
        }
        if (unmarked->second != marks)
          clone->setDiscardableAttrs(unmarked->second);
        // Collectives within the stage name its ranks.
        if (group > 1 && rank > 0 && mayNameRanks(clone))
          for (StringRef name : {"groups", "pairs"})
            if (Attribute lists = clone->getAttr(name); isRankLists(lists))
              clone->setAttr(name,
                             offsetRanks(cast<ArrayAttr>(lists), rank * group));
        // The action rides in the location to the plan (for traces and the
        // measured bubble); the ONNX node's name stays the first inside.
        if (StringAttr action = info[item.position].action)
          clone->setLoc(
              FusedLoc::get(clone->getContext(), {clone->getLoc()}, action));
        auto sends = sendsAt.find(item.position);
        for (const Transfer *send :
             sends == sendsAt.end()
                 ? ArrayRef<const Transfer *>()
                 : ArrayRef<const Transfer *>(sends->second)) {
          const Transfer &t = *send;
          if (t.source != rank)
            continue;
          auto release = releasedBy.find(&t);
          body.create<SendOp>(clone->getLoc(), mapping.lookupOrDefault(t.value),
                              pair(t), body.getI64IntegerAttr(t.tag),
                              release == releasedBy.end()
                                  ? IntegerAttr()
                                  : body.getI64IntegerAttr(release->second));
        }
      }
      SmallVector<Value> results;
      if (returns)
        for (Value value : returnOp.getOperands())
          results.push_back(mapping.lookupOrDefault(value));
      body.create<func::ReturnOp>(returnOp.getLoc(), results);
    }
    module->setAttr(LoomDialect::kWorldSizeAttrName,
                    builder.getI64IntegerAttr(ranks * group));
    step.erase();
    return success();
  }

  func::FuncOp step;
  const PipelineSchedule &schedule;
  /// Whether the schedule has W actions (asked per op; a scan of every
  /// action each time was a second of a 96-layer, 64-microbatch split).
  bool splitsBackward;
  /// The processors the ranks share, for the prediction (0: one each).
  int sharedCores;
  /// The number of compute actions of the busiest rank: the slot of work
  /// that waits for another rank after all actions.
  int end;
  int ranks;
  std::vector<Operation *> ops;
  /// Each op's position in `ops`, and what the split knows of it there.
  /// (Vectors by position, not maps by op: a 64-microbatch step has half
  /// a million ops, and a map per fact was most of the pass.)
  llvm::DenseMap<Operation *, size_t> index;
  std::vector<OpInfo> info;
  llvm::DenseMap<Operation *, llvm::SetVector<Attribute>> parametersOf;
  llvm::DenseMap<Attribute, std::set<int>> readers;
  /// Ops' discardable attributes without the action marks.
  llvm::DenseMap<DictionaryAttr, DictionaryAttr> unmarkedOf;
  /// offsetRanks' lists, by list and offset.
  llvm::DenseMap<std::pair<Attribute, int64_t>, ArrayAttr> offsetRankLists;
  std::map<std::tuple<int, int, int>, StringAttr> actionNames;
  std::vector<Transfer> transfers;
};

struct SplitStagesPass : impl::LoomSplitStagesBase<SplitStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PipelineSchedule> schedule =
        readSchedule(module, "loom-split-stages");
    if (failed(schedule))
      return signalPassFailure();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isExternal() || !step.getBody().hasOneBlock()) {
      module.emitError() << "loom-split-stages: no function @" << function
                         << " to split";
      return signalPassFailure();
    }
    if (step->hasAttr(LoomDialect::kPendingMicrobatchesAttrName)) {
      step.emitOpError("has microbatches still to make (")
          << LoomDialect::kPendingMicrobatchesAttrName
          << "): run loom-unroll-microbatches before loom-split-stages";
      return signalPassFailure();
    }
    if (failed(StageSplitter(step, *schedule, sharedCores).run()))
      return signalPassFailure();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
