//===- PropagateSharding.cpp - Shardings from annotations, by factors -----===//
//
// Collects the annotations (a `loom.parameter`'s sharding, a `loom.shard`, a
// function argument's `loom.sharding`) and hands them to the engine
// (ShardingPropagation.h) one priority at a time, 0 first; then makes the
// remaining conflicts explicit and writes the outcome onto the IR.
//
//===----------------------------------------------------------------------===//

#include "../ParameterCopies.h"
#include "ShardingPropagation.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPROPAGATESHARDING
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// The explicit boundaries around one optimizer update that ZeRO shards,
/// made before propagation (so that nothing reaches the update from the
/// parameter's other reads and stores, or from the backward pass) and given
/// their shardings once the rest has propagated: the parameter operand, the
/// gradient where the backward pass delivers it (`gradients`: the whole
/// gradient at the end of the backward pass for stage 1, each microbatch's
/// as soon as it is produced for stages 2 and 3), and the updated parameter.
struct ZeroUpdate {
  Operation *update;
  StringAttr parameter;
  ReshardOp param, updated;
  SmallVector<ReshardOp> gradients;
  SmallVector<StringAttr> states;
  /// Set once the annotations have propagated: the parameter's sharding
  /// (whole over the ZeRO axis) and the shard the update runs on.
  ShardingAttr whole, shard;
};

bool isScalar(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank() == 0;
}

/// The gradient before the step scales it: `grad` (an update's gradient
/// operand) past the products with a scalar that loom-build-train-step
/// applies (1/K with --grad-accum, the clipping coefficient) whose other
/// factor feeds nothing but such products and its own square (the clipping
/// norm), and past the widening of a gradient kept in bf16
/// (gradient-precision=bf16), which is then reduced in bf16.
Value unscaledGradient(Value grad) {
  while (true) {
    if (auto widen = grad.getDefiningOp<CastOp>()) {
      // Only the widening: the rounding below it is where the bf16
      // gradient is made.
      if (!widen->hasAttr(LoomDialect::kKeptGradientAttrName) ||
          getElementTypeOrSelf(widen.getInput()).getIntOrFloatBitWidth() >=
              getElementTypeOrSelf(widen.getType()).getIntOrFloatBitWidth())
        break;
      grad = widen.getInput();
      continue;
    }
    auto mul = grad.getDefiningOp<MulOp>();
    if (!mul)
      break;
    Value factor = mul.getLhs();
    if (isScalar(factor) || !isScalar(mul.getRhs()))
      break;
    bool onlyScaled = llvm::all_of(factor.getUsers(), [&](Operation *user) {
      auto product = dyn_cast<MulOp>(user);
      return product && product.getLhs() == factor &&
             (product.getRhs() == factor || isScalar(product.getRhs()));
    });
    if (!onlyScaled)
      break;
    grad = factor;
  }
  return grad;
}

/// The uses through which each microbatch's gradient enters the sum that
/// loom-build-train-step marks (`loom.gradient_accumulation`), or `sum`'s
/// uses when it is no such sum.
void microbatchTerms(Value sum, SmallVectorImpl<OpOperand *> &terms) {
  auto add = sum.getDefiningOp<AddOp>();
  if (!add || !add->hasAttr(LoomDialect::kGradientAccumulationAttrName)) {
    for (OpOperand &use : sum.getUses())
      terms.push_back(&use);
    return;
  }
  for (OpOperand &operand : add->getOpOperands()) {
    auto inner = operand.get().getDefiningOp<AddOp>();
    if (inner && inner->hasAttr(LoomDialect::kGradientAccumulationAttrName))
      microbatchTerms(operand.get(), terms);
    else
      terms.push_back(&operand);
  }
}

/// A placeholder reshard of `value` (its sharding is set later), right
/// after `value` is produced.
ReshardOp reshardAfter(Value value, FlatSymbolRefAttr meshName,
                       StringRef reason) {
  OpBuilder builder(value.getContext());
  if (Operation *def = value.getDefiningOp())
    builder.setInsertionPointAfter(def);
  else
    builder.setInsertionPointToStart(value.getParentBlock());
  auto type = cast<RankedTensorType>(value.getType());
  return builder.create<ReshardOp>(
      value.getLoc(), value,
      makeSharding(value.getContext(), meshName, DimAxes(type.getRank())),
      builder.getStringAttr(reason));
}

/// Isolates every `loom.adamw_update` and `loom.sgd_update` of `func`
/// behind reshards (their shardings are set later), for ZeRO `stage`; stage
/// 0 (data parallelism without ZeRO, reducing gradients eagerly) isolates
/// only the gradients, each after the microbatches' sum.
SmallVector<ZeroUpdate>
isolateUpdates(func::FuncOp func, FlatSymbolRefAttr meshName, int64_t stage) {
  SmallVector<ZeroUpdate> updates;
  auto readOf = [](Value value) -> StringAttr {
    auto read = value.getDefiningOp<ParamOp>();
    return read ? read.getNameAttr().getAttr() : StringAttr();
  };
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<AdamWUpdateOp, SGDUpdateOp>(op))
      ops.push_back(op);
  });
  // Gradients shared by several updates are resharded once.
  llvm::DenseMap<Value, ReshardOp> gradientReshards;
  SmallVector<ReshardOp> wholeGradients;
  for (Operation *op : ops) {
    ValueRange states = isa<AdamWUpdateOp>(op)
                            ? cast<AdamWUpdateOp>(op).getStates()
                            : cast<SGDUpdateOp>(op).getStates();
    StringAttr parameter = readOf(op->getOperand(0));
    if (!parameter)
      continue;
    ZeroUpdate zero{op, parameter, {}, {}, {}, {}, {}, {}};
    for (Value state : states)
      if (StringAttr name = readOf(state))
        zero.states.push_back(name);
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    ShardingAttr placeholder =
        makeSharding(op->getContext(), meshName, DimAxes(type.getRank()));
    OpBuilder builder(op);
    if (stage > 0) {
      zero.param = builder.create<ReshardOp>(
          op->getLoc(), op->getOperand(0), placeholder,
          builder.getStringAttr("ZeRO: the update runs on its shard"));
      op->setOperand(0, zero.param);
    }

    Value gradient = unscaledGradient(op->getOperand(1));
    SmallVector<OpOperand *> terms;
    if (stage >= 2)
      microbatchTerms(gradient, terms);
    auto reshardOnce = [&](Value value) {
      ReshardOp &reshard = gradientReshards[value];
      if (!reshard)
        reshard = reshardAfter(
            value, meshName,
            stage == 0   ? "data parallelism: the gradient all-reduced as "
                           "soon as it is produced"
            : stage >= 2 ? "ZeRO: the gradient reduced and scattered as soon "
                           "as it is produced"
                         : "ZeRO: the gradient reduced and scattered after "
                           "the backward pass");
      return reshard;
    };
    if (terms.empty()) {
      ReshardOp reshard = reshardOnce(gradient);
      gradient.replaceAllUsesExcept(reshard.getResult(), reshard);
      zero.gradients.push_back(reshard);
      wholeGradients.push_back(reshard);
    } else {
      for (OpOperand *term : terms) {
        ReshardOp reshard = reshardOnce(term->get());
        term->set(reshard.getResult());
        zero.gradients.push_back(reshard);
      }
    }

    if (stage > 0) {
      builder.setInsertionPointAfter(op);
      zero.updated = builder.create<ReshardOp>(
          op->getLoc(), op->getResult(0), placeholder,
          builder.getStringAttr("ZeRO: the updated shard, gathered"));
      op->getResult(0).replaceAllUsesExcept(zero.updated, zero.updated);
    }
    updates.push_back(zero);
  }

  // Stage 1 keeps the whole gradients until the backward pass has produced
  // the last of them (ZeRO-1 reduces at the end of the backward pass), when
  // that is before any of them is used.
  if (stage == 1 && !wholeGradients.empty()) {
    Operation *last = nullptr;
    for (ReshardOp reshard : wholeGradients)
      if (Operation *def = reshard.getInput().getDefiningOp())
        if (!last || last->isBeforeInBlock(def))
          last = def;
    bool beforeUses =
        last && llvm::all_of(wholeGradients, [&](ReshardOp r) {
          return llvm::all_of(r->getUsers(), [&](Operation *user) {
            return user->getBlock() == last->getBlock() &&
                   last->isBeforeInBlock(user);
          });
        });
    if (beforeUses)
      for (ReshardOp reshard : llvm::reverse(wholeGradients))
        reshard->moveAfter(last);
  }
  return updates;
}

/// ZeRO's sharding of the optimizer updates over `axis`, once everything
/// annotated has propagated (so each parameter has its tensor-parallel
/// split): each update runs on the shard of its parameter refined by
/// `axis` on the first dimension whose block the axis divides (minor to
/// the split it has), with its states and gradient sharded alike.
/// Partitioned, the gradient (a partial sum over `axis`) is reduced and
/// scattered, the parameter read sliced locally, and the updated shard
/// gathered into the parameter, which stays whole over `axis` (stage 3
/// shards it afterwards, shardParameters). Returns the bytes of the
/// gradients each rank holds: whole up to stage 1, shards from stage 2.
/// Stage 0 (eager data parallelism) gives each gradient its parameter's
/// sharding where it is produced, so that it is all-reduced there.
int64_t shardOptimizerStates(ModuleOp module,
                             MutableArrayRef<ZeroUpdate> updates, MeshAttr mesh,
                             FlatSymbolRefAttr meshName,
                             ShardingPropagation &propagation,
                             StringRef axisName, int64_t stage,
                             int64_t priority) {
  MLIRContext *context = module.getContext();
  StringAttr axis = StringAttr::get(context, axisName);
  int64_t ways = mesh.getAxisSize(axisName);
  int64_t gradientBytes = 0;
  for (ZeroUpdate &zero : updates) {
    auto type = cast<RankedTensorType>(zero.update->getOperand(0).getType());
    const ShardingPropagation::Entry *entry =
        propagation.parameterEntry(zero.parameter);
    DimAxes whole =
        entry && entry->isSet() ? entry->axes : DimAxes(type.getRank());
    DimAxes shard = whole;
    bool split = llvm::any_of(whole, [&](const AxisList &axes) {
      return llvm::is_contained(axes, axis);
    });
    for (int64_t dim = 0; !split && dim < type.getRank(); ++dim)
      if ((type.getDimSize(dim) / axesSize(mesh, whole[dim])) % ways == 0) {
        shard[dim].push_back(axis);
        split = true;
      }
    std::string origin =
        ("ZeRO-" + Twine(stage) + ": the update of @" +
         zero.parameter.getValue() + " on its shard " + formatDimAxes(shard))
            .str();
    zero.shard = makeSharding(context, meshName, shard);
    zero.whole = makeSharding(context, meshName, whole);
    // As the gradient is kept: in bf16 when it is widened for the update.
    auto gradientType = cast<RankedTensorType>(
        unscaledGradient(zero.update->getOperand(1)).getType());
    int64_t elements = 1;
    for (int64_t size :
         localShape(gradientType.getShape(), stage >= 2 ? shard : whole, mesh))
      elements *= size;
    gradientBytes +=
        elements * int64_t(gradientType.getElementTypeBitWidth() / 8);
    if (stage == 0) {
      std::string reason = "data parallelism: the gradient of @" +
                           zero.parameter.getValue().str() +
                           " reduced where it is produced";
      bool splitParameter = llvm::any_of(
          whole, [](const AxisList &axes) { return !axes.empty(); });
      for (ReshardOp reshard : zero.gradients) {
        reshard.setShardingAttr(zero.whole);
        propagation.seedValue(reshard.getResult(), zero.whole, priority,
                              reason);
        // The gradient is made split as its parameter is (tensor
        // parallelism's split) wherever nothing else says how: a
        // vocabulary-parallel embedding's scatter_add, whose rows no
        // operand splits, was made whole on every tp rank (3 x 3.9 GiB on
        // the first stage of Megatron's 530B row) and sliced after the
        // all-reduce.
        if (splitParameter)
          propagation.seedValue(reshard.getInput(), zero.whole, priority,
                                reason);
      }
      continue;
    }
    zero.param.setShardingAttr(zero.shard);
    propagation.seedValue(zero.param.getResult(), zero.shard, priority, origin);
    for (ReshardOp reshard : zero.gradients) {
      reshard.setShardingAttr(zero.shard);
      propagation.seedValue(reshard.getResult(), zero.shard, priority, origin);
    }
    zero.updated.setShardingAttr(zero.whole);
    propagation.seedValue(zero.updated.getResult(), zero.whole, priority,
                          ("ZeRO-" + Twine(stage) + ": @" +
                           zero.parameter.getValue() + " stays " +
                           formatDimAxes(whole))
                              .str());
    for (StringAttr state : zero.states)
      propagation.seedParameter(state, zero.shard, priority, origin);
  }
  propagation.propagate(priority);
  return gradientBytes;
}

/// A cast to a narrower float type (f32 to bf16).
bool isNarrowing(CastOp narrow) {
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(narrow.getInput()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(narrow.getType()));
  return from && to && to.getWidth() < from.getWidth();
}

/// ZeRO stage 3, once propagation has written its outcome: every parameter
/// whose update runs on a shard lives as that shard, and each op that reads
/// it gets it gathered just before (a reshard to its whole sharding), so
/// that the whole parameter lives only from there to that op: once in the
/// forward pass and again in the backward pass where it is read there.
void shardParameters(ModuleOp module, func::FuncOp func,
                     ArrayRef<ZeroUpdate> updates) {
  SymbolTable symbols(module);
  llvm::DenseMap<StringAttr, const ZeroUpdate *> byName;
  for (const ZeroUpdate &zero : updates)
    byName[zero.parameter] = &zero;
  SmallVector<ParamOp> reads;
  func.walk([&](ParamOp read) {
    if (byName.count(read.getNameAttr().getAttr()))
      reads.push_back(read);
  });
  Builder attrs(module.getContext());
  for (ParamOp read : reads) {
    const ZeroUpdate &zero = *byName[read.getNameAttr().getAttr()];
    auto reason = attrs.getStringAttr("ZeRO-3: @" + zero.parameter.getValue() +
                                      " gathered for this use");
    llvm::SetVector<Operation *> users;
    for (Operation *user : read->getUsers())
      if (user != zero.param)
        users.insert(user);
    read->setAttr(LoomDialect::kShardingAttrName, zero.shard);
    // A read of its own per op: loom-partition shares the conversions of
    // one value, which would keep the first gather alive for every use.
    for (Operation *user : users) {
      // Mixed precision's bf16 copy of the weight, which the forward GEMM
      // and the backward's read: each of them casts its own shard and
      // gathers it in bf16 (half the bytes; loom-cache-parameter-casts
      // makes the shard's cast a bf16 shard of its own), and the gathered
      // copy dies at that GEMM instead of living from forward to backward.
      if (auto narrow = dyn_cast<CastOp>(user); narrow && isNarrowing(narrow)) {
        for (OpOperand &use : llvm::make_early_inc_range(narrow->getUses())) {
          OpBuilder builder(use.getOwner());
          Operation *own = builder.clone(*read);
          Operation *ownCast = builder.clone(*narrow);
          ownCast->setOperand(0, own->getResult(0));
          // It casts the shard: the shard's sharding, and no factor
          // decision of the whole cast's.
          ownCast->setAttr(LoomDialect::kShardingAttrName, zero.shard);
          ownCast->removeAttr(LoomDialect::kFactorShardingAttrName);
          ownCast->removeAttr(LoomDialect::kShardingOriginAttrName);
          auto gather = builder.create<ReshardOp>(use.getOwner()->getLoc(),
                                                  ownCast->getResult(0),
                                                  zero.whole, reason);
          use.set(gather.getResult());
        }
        narrow->erase();
        continue;
      }
      OpBuilder builder(user);
      Operation *own = builder.clone(*read);
      auto gather = builder.create<ReshardOp>(user->getLoc(), own->getResult(0),
                                              zero.whole, reason);
      user->replaceUsesOfWith(read.getResult(), gather.getResult());
    }
    if (read->use_empty())
      read->erase();
  }
  for (const ZeroUpdate &zero : updates) {
    auto parameter = symbols.lookup<ParameterOp>(zero.parameter);
    parameter.setShardingAttr(zero.shard);
    parameter->setAttr(LoomDialect::kShardingOriginAttrName,
                       attrs.getStringAttr("ZeRO-3: @" +
                                           zero.parameter.getValue() +
                                           " lives as its shard"));
    ReshardOp updated = zero.updated;
    updated.setShardingAttr(zero.shard);
  }
}

/// The casts to bf16 that are the only readers (besides its ZeRO update) of
/// `zero`'s parameter, all in `func` and on one pipeline stage; empty when
/// anything reads it otherwise.
SmallVector<CastOp> onlyNarrowedReads(ArrayRef<ParamOp> reads,
                                      func::FuncOp func,
                                      const ZeroUpdate &zero) {
  SmallVector<CastOp> casts;
  for (ParamOp read : reads) {
    if (read->getParentOfType<func::FuncOp>() != func)
      return {};
    for (Operation *user : read->getUsers()) {
      if (user == zero.param)
        continue;
      auto narrow = dyn_cast<CastOp>(user);
      if (!narrow || !isNarrowing(narrow) ||
          !getElementTypeOrSelf(narrow.getType()).isBF16())
        return {};
      casts.push_back(narrow);
    }
  }
  if (casts.empty())
    return {};
  // One stage: the copy's store goes where its master's update does.
  Attribute stage = casts.front()->getAttr(LoomDialect::kStageAttrName);
  for (CastOp narrow : casts)
    if (narrow->getAttr(LoomDialect::kStageAttrName) != stage)
      return {};
  return casts;
}

/// ZeRO stages 1 and 2 under mixed precision (ZeRO's and Megatron's
/// distributed optimizer's layout): a parameter that the step reads only
/// through casts to bf16 (a GEMM weight) keeps a whole bf16 copy for the
/// forward and backward passes, `@NAME.bf16` (what loom-cache-parameter-
/// casts makes on one rank, with the same name), and its f32 master lives
/// as its shard, read by nothing but its update: the update casts the
/// updated shard and all-gathers the copy in bf16. The model states per
/// rank become 2 bytes of copy (and the gradient) per element plus the
/// master's 4 and the moments' 8 divided by N, and the gather moves half
/// the bytes. The copy is the cast of the master, as on one rank: every
/// value is unchanged.
void shardMasters(ModuleOp module, func::FuncOp func,
                  ArrayRef<ZeroUpdate> updates, int64_t stage) {
  SymbolTable symbols(module);
  Builder attrs(module.getContext());
  // Every read of each parameter, in any function (one walk: the updates
  // are as many as the parameters).
  llvm::DenseMap<StringAttr, SmallVector<ParamOp>> reads;
  module.walk([&](ParamOp read) {
    reads[read.getNameAttr().getAttr()].push_back(read);
  });
  for (const ZeroUpdate &zero : updates) {
    SmallVector<CastOp> casts =
        onlyNarrowedReads(reads.lookup(zero.parameter), func, zero);
    auto parameter = symbols.lookup<ParameterOp>(zero.parameter);
    if (casts.empty() || !parameter)
      continue;
    Type element = getElementTypeOrSelf(casts.front().getType());
    ParameterOp copy = declareCastCopy(parameter, element, zero.whole, symbols);
    std::string stageName = ("ZeRO-" + Twine(stage)).str();
    copy->setAttr(LoomDialect::kShardingOriginAttrName,
                  attrs.getStringAttr(stageName + ": the bf16 copy of @" +
                                      zero.parameter.getValue() +
                                      ", whole for the GEMMs"));
    for (CastOp narrow : casts) {
      OpBuilder at(narrow);
      auto read =
          at.create<ParamOp>(narrow.getLoc(), narrow.getType(),
                             FlatSymbolRefAttr::get(copy.getSymNameAttr()));
      // Its action (stage, microbatch, backward) and its sharding.
      for (NamedAttribute attr : narrow->getDiscardableAttrs())
        if (attr.getName() != LoomDialect::kFactorShardingAttrName)
          read->setAttr(attr.getName(), attr.getValue());
      read->setAttr(LoomDialect::kShardingAttrName, zero.whole);
      narrow.replaceAllUsesWith(read.getResult());
      auto master = narrow.getInput().getDefiningOp<ParamOp>();
      narrow->erase();
      if (master->use_empty())
        master->erase();
    }
    // The master: a shard, read by its update only (the reads the casts
    // took are gone).
    if (auto read = zero.param->getOperand(0).getDefiningOp<ParamOp>())
      read->setAttr(LoomDialect::kShardingAttrName, zero.shard);
    parameter.setShardingAttr(zero.shard);
    parameter->setAttr(LoomDialect::kShardingOriginAttrName,
                       attrs.getStringAttr(stageName + ": the f32 master of @" +
                                           zero.parameter.getValue() +
                                           " lives as its shard"));
    ReshardOp updated = zero.updated;
    updated.setShardingAttr(zero.shard);
    SmallVector<AssignOp> stores;
    for (Operation *user : updated->getUsers())
      if (auto assign = dyn_cast<AssignOp>(user);
          assign && assign.getNameAttr().getAttr() == zero.parameter)
        stores.push_back(assign);
    for (AssignOp store : stores) {
      OpBuilder after(store);
      after.setInsertionPointAfter(store);
      auto type = cast<RankedTensorType>(updated.getType());
      auto narrow = after.create<CastOp>(store.getLoc(), type.clone(element),
                                         updated.getResult());
      narrow->setAttr(LoomDialect::kShardingAttrName, zero.shard);
      auto gather = after.create<ReshardOp>(
          store.getLoc(), narrow.getResult(), zero.whole,
          attrs.getStringAttr(stageName + ": the updated shard's bf16 copy, "
                                          "gathered"));
      after.create<AssignOp>(store.getLoc(), copy.getSymName(),
                             gather.getResult());
    }
  }
}

/// Every annotation of `func` and the module's parameters, planted and
/// propagated in priority order.
void propagateAnnotations(ModuleOp module, func::FuncOp func, MeshAttr mesh,
                          FlatSymbolRefAttr meshName, int64_t zeroStage,
                          StringRef zeroAxis, bool eagerGradients) {
  bool isolate = zeroStage > 0 || eagerGradients;
  struct Seed {
    int64_t priority;
    Value value; // or null for a parameter
    StringAttr parameter;
    ShardingAttr sharding;
    std::string origin;
  };
  SmallVector<Seed> seeds;
  for (auto parameter : module.getOps<ParameterOp>())
    if (std::optional<ShardingAttr> sharding = parameter.getSharding()) {
      int64_t priority = parameter.getShardingPriority().value_or(0);
      seeds.push_back({priority, Value(), parameter.getSymNameAttr(), *sharding,
                       ("@" + parameter.getSymName() + " annotated " +
                        formatDimAxes(dimAxesOf(*sharding)) + " (priority " +
                        Twine(priority) + ")")
                           .str()});
    }
  for (BlockArgument argument : func.getArguments())
    if (auto sharding = func.getArgAttrOfType<ShardingAttr>(
            argument.getArgNumber(), LoomDialect::kShardingAttrName))
      seeds.push_back({0, argument, StringAttr(), sharding,
                       ("argument #" + Twine(argument.getArgNumber()) +
                        " annotated " + formatDimAxes(dimAxesOf(sharding)))
                           .str()});
  func.walk([&](ShardOp shard) {
    int64_t priority = shard.getPriority().value_or(0);
    seeds.push_back(
        {priority, shard.getResult(), StringAttr(), shard.getSharding(),
         ("loom.shard " + formatDimAxes(dimAxesOf(shard.getSharding())) +
          " (priority " + Twine(priority) + ") at " +
          describeOp(shard).substr(strlen("loom.shard at ")))
             .str()});
  });

  SmallVector<ZeroUpdate> updates;
  if (isolate)
    updates = isolateUpdates(func, meshName, zeroStage);
  ShardingPropagation propagation(module, func, mesh, meshName);
  std::set<int64_t> priorities;
  for (const Seed &seed : seeds)
    priorities.insert(seed.priority);
  for (int64_t priority : priorities) {
    for (const Seed &seed : seeds) {
      if (seed.priority != priority)
        continue;
      if (seed.value)
        propagation.seedValue(seed.value, seed.sharding, priority, seed.origin);
      else
        propagation.seedParameter(seed.parameter, seed.sharding, priority,
                                  seed.origin);
    }
    propagation.propagate(priority);
  }
  int64_t gradientBytes = 0;
  if (isolate)
    gradientBytes = shardOptimizerStates(
        module, updates, mesh, meshName, propagation, zeroAxis, zeroStage,
        priorities.empty() ? 0 : *priorities.rbegin() + 1);
  propagation.insertReshards();
  propagation.write();
  if (zeroStage >= 3)
    shardParameters(module, func, updates);
  else if (zeroStage >= 1)
    shardMasters(module, func, updates, zeroStage);
  if (isolate)
    func->setAttr(LoomDialect::kGradientBytesAttrName,
                  IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                   gradientBytes));
  else // (A count of whole gradients, which shards would make wrong.)
    func->removeAttr(LoomDialect::kGradientBytesAttrName);
}

/// The one mesh every annotation of `module` names, if any.
FailureOr<std::optional<FlatSymbolRefAttr>> findMesh(ModuleOp module) {
  std::optional<FlatSymbolRefAttr> mesh;
  Operation *first = nullptr;
  auto check = [&](Operation *at, ShardingAttr sharding) -> LogicalResult {
    if (!mesh) {
      mesh = sharding.getMesh();
      first = at;
      return success();
    }
    if (*mesh == sharding.getMesh())
      return success();
    InFlightDiagnostic diag = at->emitOpError()
                              << "names mesh " << sharding.getMesh()
                              << ", but another annotation names " << *mesh
                              << "; sharding propagation needs one mesh";
    diag.attachNote(first->getLoc()) << "the other annotation";
    return diag;
  };
  WalkResult walk = module.walk([&](Operation *op) {
    if (auto parameter = dyn_cast<ParameterOp>(op))
      if (std::optional<ShardingAttr> sharding = parameter.getSharding())
        if (failed(check(op, *sharding)))
          return WalkResult::interrupt();
    if (auto shard = dyn_cast<ShardOp>(op))
      if (failed(check(op, shard.getSharding())))
        return WalkResult::interrupt();
    if (auto func = dyn_cast<func::FuncOp>(op))
      for (unsigned arg = 0; arg < func.getNumArguments(); ++arg)
        if (auto sharding = func.getArgAttrOfType<ShardingAttr>(
                arg, LoomDialect::kShardingAttrName))
          if (failed(check(op, sharding)))
            return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return mesh;
}

struct PropagateShardingPass
    : impl::LoomPropagateShardingBase<PropagateShardingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<FlatSymbolRefAttr>> meshName = findMesh(module);
    if (failed(meshName))
      return signalPassFailure();
    if (!*meshName)
      return; // nothing is annotated: every value stays replicated
    FailureOr<MeshAttr> mesh = lookupMesh(module, **meshName);
    if (failed(mesh))
      return signalPassFailure();
    if (zero < 0 || zero > 3) {
      module.emitError("loom-propagate-sharding: zero=")
          << static_cast<int64_t>(zero)
          << " is no ZeRO stage (0: off, 1, 2 or 3)";
      return signalPassFailure();
    }
    if (zero > 0 && !mesh->getAxisIndex(zeroAxis)) {
      module.emitError("loom-propagate-sharding: zero=")
          << static_cast<int64_t>(zero) << " shards over axis '" << zeroAxis
          << "', which the mesh does not have";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      propagateAnnotations(module, func, *mesh, **meshName, zero, zeroAxis,
                           eagerGradients && mesh->getAxisIndex(zeroAxis));
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
