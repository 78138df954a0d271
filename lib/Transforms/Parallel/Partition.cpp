//===- Partition.cpp - One SPMD program with local shapes -----------------===//
//
// Walks the sharded function once, in order, keeping for every value its
// local value and its state: the axes that split each dimension and the
// axes over which it is still a partial sum or maximum. At each op the
// factors' axes are read from the propagated shardings (the results' for
// the factors they have, the operands' for contracted and reduced ones);
// every operand is brought to what those factors ask of it (all_reduce of a
// partial, all_gather of an extra split, a local slice of a missing one),
// except that a partial operand stays partial through ops that are linear
// in it; the op is then given its local types. Results that lost a sharded
// contracted or reduced factor become partial, and are reduced only where
// a consumer cannot take a partial value.
//
//===----------------------------------------------------------------------===//

#include "FactorSharding.h"
#include "VocabParallel.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <tuple>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPARTITION
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// A value as one rank holds it.
struct Local {
  Value value;
  DimAxes axes;
  PartialKind partial = PartialKind::none;
  AxisList partialAxes;
};

class Partitioner {
public:
  Partitioner(ModuleOp module, SymbolTable &symbols, func::FuncOp func,
              MeshAttr mesh, FlatSymbolRefAttr meshName)
      : module(module), symbols(symbols), func(func), mesh(mesh),
        meshName(meshName), context(module.getContext()) {}

  LogicalResult run();

private:
  // --- what propagation decided -------------------------------------------
  /// What propagation said of a value, read before any op is rewritten.
  struct Decision {
    DimAxes wanted;
    /// (The text of an attribute, which lives as long as the context: no
    /// copy per value.)
    StringRef origin;
    Type globalType;
  };

  void recordDecisions() {
    // Sized once: a 175B-shaped pipeline's step has hundreds of thousands
    // of values, and growing the maps step by step rehashed (and faulted
    // in fresh pages for) every entry again: 6.0 -> 4.7 s of the pass at
    // pp 8 x tp 8 with 64 microbatches.
    unsigned ops = 0, values = func.getNumArguments();
    func.walk([&](Operation *op) {
      ++ops;
      values += op->getNumResults();
    });
    decisions.reserve(values);
    locals.reserve(values);
    rules.reserve(ops);
    auto record = [&](Value value) {
      if (isa<RankedTensorType>(value.getType()))
        decisions[value] = {readWanted(value), readOrigin(value),
                            value.getType()};
    };
    for (BlockArgument argument : func.getArguments())
      record(argument);
    func.walk([&](Operation *op) {
      for (Value result : op->getResults())
        record(result);
      // Rules read the types, which partitioning makes local.
      if (auto ruleOp = dyn_cast<FactorRuleOpInterface>(op))
        rules.try_emplace(op, ruleOp.getFactorRule());
    });
  }

  DimAxes wantedOf(Value value) {
    auto it = decisions.find(value);
    if (it != decisions.end())
      return it->second.wanted;
    return DimAxes(cast<RankedTensorType>(value.getType()).getRank());
  }

  StringRef originOf(Value value) {
    auto it = decisions.find(value);
    return it == decisions.end() ? StringRef() : it->second.origin;
  }

  Type globalTypeOf(Value value) {
    auto it = decisions.find(value);
    return it == decisions.end() ? value.getType() : it->second.globalType;
  }

  DimAxes readWanted(Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    ShardingAttr sharding;
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      sharding = func.getArgAttrOfType<ShardingAttr>(
          arg.getArgNumber(), LoomDialect::kShardingAttrName);
    } else {
      Operation *op = value.getDefiningOp();
      Attribute attr = op->getAttr(LoomDialect::kShardingAttrName);
      if (auto array = dyn_cast_or_null<ArrayAttr>(attr))
        sharding =
            cast<ShardingAttr>(array[cast<OpResult>(value).getResultNumber()]);
      else
        sharding = dyn_cast_or_null<ShardingAttr>(attr);
    }
    if (!sharding)
      return DimAxes(type.getRank());
    return dimAxesOf(sharding);
  }

  StringRef readOrigin(Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      auto origin = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), LoomDialect::kShardingOriginAttrName);
      return origin ? origin.getValue() : StringRef();
    }
    Operation *op = value.getDefiningOp();
    if (auto reshard = dyn_cast<ReshardOp>(op))
      return reshard.getReasonAttr().getValue();
    Attribute attr = op->getAttr(LoomDialect::kShardingOriginAttrName);
    if (auto array = dyn_cast_or_null<ArrayAttr>(attr))
      return cast<StringAttr>(array[cast<OpResult>(value).getResultNumber()])
          .getValue();
    if (auto origin = dyn_cast_or_null<StringAttr>(attr))
      return origin.getValue();
    return StringRef();
  }

  // --- groups and coordinates -----------------------------------------------
  /// Rank groups of the devices that differ only along `axes`. (Each
  /// collective asks, and a mesh of a thousand devices makes every answer
  /// a walk over them: each set of axes is answered once.)
  ArrayAttr groupsOver(ArrayRef<StringAttr> axes) {
    std::vector<const void *> key;
    for (StringAttr axis : axes)
      key.push_back(axis.getAsOpaquePointer());
    ArrayAttr &groups = groupsByAxes[key];
    if (!groups)
      groups = computeGroupsOver(axes);
    return groups;
  }

  ArrayAttr computeGroupsOver(ArrayRef<StringAttr> axes) {
    ArrayRef<int64_t> sizes = mesh.getAxisSizes();
    int64_t devices = mesh.getNumDevices();
    std::map<std::vector<int64_t>, SmallVector<int64_t>> groups;
    for (int64_t rank = 0; rank < devices; ++rank) {
      std::vector<int64_t> key;
      int64_t rest = rank;
      for (int64_t axis = sizes.size() - 1; axis >= 0; --axis) {
        int64_t coordinate = rest % sizes[axis];
        rest /= sizes[axis];
        bool inGroup = llvm::any_of(axes, [&](StringAttr name) {
          return name == mesh.getAxisNames()[axis];
        });
        key.push_back(inGroup ? -1 : coordinate);
      }
      groups[key].push_back(rank);
    }
    SmallVector<SmallVector<int64_t>> ordered;
    for (auto &[key, ranks] : groups)
      ordered.push_back(ranks);
    llvm::sort(ordered);
    SmallVector<Attribute> lists;
    for (ArrayRef<int64_t> ranks : ordered)
      lists.push_back(DenseI64ArrayAttr::get(context, ranks));
    return ArrayAttr::get(context, lists);
  }

  /// Which block of a dimension split over `axes` (major first) device
  /// `rank` holds.
  int64_t blockIndex(int64_t rank, ArrayRef<StringAttr> axes) {
    ArrayRef<int64_t> sizes = mesh.getAxisSizes();
    SmallVector<int64_t> coords(sizes.size());
    for (int64_t axis = int64_t(sizes.size()) - 1, rest = rank; axis >= 0;
         --axis) {
      coords[axis] = rest % sizes[axis];
      rest /= sizes[axis];
    }
    int64_t block = 0;
    for (StringAttr name : axes) {
      unsigned index = *mesh.getAxisIndex(name.getValue());
      block = block * sizes[index] + coords[index];
    }
    return block;
  }

  /// This rank's coordinate along `axis`, as a tensor<1xi64>: the local
  /// shard of an iota parameter split over the axis.
  Value coordinate(OpBuilder &builder, Location loc, StringAttr axis) {
    std::string name = ("loom.mesh_coordinate." + axis.getValue()).str();
    auto symbol = StringAttr::get(context, name);
    int64_t size = mesh.getAxisSize(axis.getValue());
    auto global = RankedTensorType::get({size}, builder.getI64Type());
    if (!symbols.lookup(symbol)) {
      OpBuilder moduleBuilder(module.getBodyRegion());
      moduleBuilder.setInsertionPointToStart(module.getBody());
      SmallVector<int64_t> iota = llvm::to_vector(llvm::seq<int64_t>(0, size));
      auto parameter = moduleBuilder.create<ParameterOp>(
          module.getLoc(), symbol, TypeAttr::get(global), UnitAttr(),
          makeSharding(context, meshName, DimAxes{AxisList{axis}}),
          DenseElementsAttr::get(global, ArrayRef<int64_t>(iota)));
      symbols.insert(parameter);
    }
    return builder.create<ParamOp>(
        loc, RankedTensorType::get({1}, builder.getI64Type()),
        FlatSymbolRefAttr::get(symbol));
  }

  /// Where this rank's block of a tensor of `shape` split by `dims` starts,
  /// one offset per dimension, as a tensor<rank x i64>: the local shard of
  /// a table parameter with every block's offsets, split over the axes
  /// that split the tensor (no kernel runs: the plan gives each rank its
  /// row). Tensors of one shape and split share one table.
  Value blockOffsets(OpBuilder &builder, Location loc, ArrayRef<int64_t> shape,
                     const DimAxes &dims) {
    int64_t rank = shape.size();
    AxisList allAxes;
    std::string name = "loom.block_offsets.";
    llvm::raw_string_ostream os(name);
    llvm::interleave(shape, os, "x");
    for (const AxisList &axes : dims) {
      os << ".";
      if (axes.empty())
        os << "-";
      llvm::interleave(
          axes, os, [&](StringAttr axis) { os << axis.getValue(); }, "+");
      allAxes.append(axes.begin(), axes.end());
    }
    auto symbol = StringAttr::get(context, name);
    auto localType = RankedTensorType::get({rank}, builder.getI64Type());
    if (!symbols.lookup(symbol)) {
      // Block b (over `allAxes`, major first) holds, per dimension, the
      // block its own axes' coordinates select.
      SmallVector<int64_t> axisSizes;
      int64_t blocks = 1;
      for (StringAttr axis : allAxes) {
        axisSizes.push_back(mesh.getAxisSize(axis.getValue()));
        blocks *= axisSizes.back();
      }
      SmallVector<int64_t> local = localShape(shape, dims, mesh);
      SmallVector<int64_t> table;
      for (int64_t block = 0; block < blocks; ++block) {
        SmallVector<int64_t> coords(allAxes.size());
        for (int64_t i = int64_t(allAxes.size()) - 1, rest = block; i >= 0;
             --i) {
          coords[i] = rest % axisSizes[i];
          rest /= axisSizes[i];
        }
        unsigned next = 0;
        for (auto [dim, axes] : llvm::enumerate(dims)) {
          int64_t index = 0;
          for (unsigned i = 0; i < axes.size(); ++i, ++next)
            index = index * axisSizes[next] + coords[next];
          table.push_back(index * local[dim]);
        }
      }
      auto global =
          RankedTensorType::get({blocks * rank}, builder.getI64Type());
      OpBuilder moduleBuilder(module.getBodyRegion());
      moduleBuilder.setInsertionPointToStart(module.getBody());
      auto parameter = moduleBuilder.create<ParameterOp>(
          module.getLoc(), symbol, TypeAttr::get(global), UnitAttr(),
          makeSharding(context, meshName, DimAxes{allAxes}),
          DenseElementsAttr::get(global, ArrayRef<int64_t>(table)));
      symbols.insert(parameter);
    }
    return builder.create<ParamOp>(loc, localType,
                                   FlatSymbolRefAttr::get(symbol));
  }

  // --- moving data
  // ------------------------------------------------------------
  DictionaryAttr describe(Value global, const Local &from, const DimAxes &to,
                          StringRef origin) {
    Builder builder(context);
    SmallVector<NamedAttribute> fields = {
        builder.getNamedAttr("type", TypeAttr::get(globalTypeOf(global))),
        builder.getNamedAttr("from",
                             makeSharding(context, meshName, from.axes, {},
                                          from.partial, from.partialAxes)),
        builder.getNamedAttr("to", makeSharding(context, meshName, to)),
        builder.getNamedAttr("origin", builder.getStringAttr(origin))};
    return builder.getDictionaryAttr(fields);
  }

  /// Brings `local` (the state of `global`) to `target` (not partial).
  Value convert(OpBuilder &builder, Location loc, Value global, Local local,
                const DimAxes &target, StringRef origin) {
    // Every consumer that needs the same form shares one conversion: the
    // first is made before the first such consumer, which dominates the
    // others in the block.
    std::pair<void *, std::string> key = {
        equivalentOf(global).getAsOpaquePointer(),
        formatDimAxes(target) +
            (local.partial == PartialKind::none ? "" : " whole")};
    auto cached = conversions.find(key);
    if (cached != conversions.end())
      return cached->second;
    Value converted =
        convertUncached(builder, loc, global, local, target, origin);
    conversions[key] = converted;
    return converted;
  }

  /// The first value seen that holds the same data as `global`: a cast or
  /// a reshape of an equivalent value to the same type. Mixed precision
  /// casts an activation once per GEMM that reads it (as torch.autocast
  /// does, so that the backward pass sums their gradients in f32), and each
  /// GEMM's gradient flattens its own copy; moved to the same sharding they
  /// are the same bytes, so one conversion serves them all: under sequence
  /// parallelism one gather of a layer norm's output for the q, k and v
  /// projections, as Megatron's fused QKV GEMM has, not three. A recomputed
  /// value is a new value, so the backward never shares the forward's
  /// gathered copy (which would keep it alive).
  Value equivalentOf(Value global) {
    auto known = equivalents.find(global);
    if (known != equivalents.end())
      return known->second;
    Value root = global;
    Operation *op = global.getDefiningOp();
    if (op && isa<CastOp, ReshapeOp>(op)) {
      Value input = equivalentOf(op->getOperand(0));
      root = firstEquivalent
                 .try_emplace({op->getName().getAsOpaquePointer(),
                               global.getType().getAsOpaquePointer(),
                               input.getAsOpaquePointer()},
                              global)
                 .first->second;
    }
    equivalents[global] = root;
    return root;
  }

  Value convertUncached(OpBuilder &builder, Location loc, Value global,
                        Local local, const DimAxes &target, StringRef origin) {
    DictionaryAttr info = describe(global, local, target, origin);
    auto tag = [&](Operation *op) {
      op->setAttr(LoomDialect::kReshardingAttrName, info);
    };
    Value value = local.value;
    // A partial sum over an axis that the target splits a dimension by
    // (next after what splits it already) is reduced and scattered at
    // once: a reduce_scatter moves half an all-reduce's bytes and leaves
    // each rank its block (sequence parallelism, ZeRO). What remains
    // partial over other axes (hybrid sharding's replicas) is all-reduced
    // on the block below.
    for (StringAttr axis : AxisList(local.partialAxes)) {
      if (local.partial != PartialKind::sum)
        break;
      for (unsigned dim = 0; dim < target.size(); ++dim) {
        const AxisList &have = local.axes[dim];
        const AxisList &want = target[dim];
        if (want.size() != have.size() + 1 || want.back() != axis ||
            !llvm::equal(have, ArrayRef<StringAttr>(want).drop_back()))
          continue;
        auto type = cast<RankedTensorType>(value.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[dim] /= mesh.getAxisSize(axis.getValue());
        auto scatter = builder.create<ReduceScatterOp>(
            loc, RankedTensorType::get(shape, type.getElementType()),
            CollectiveReduction::sum, value, uint64_t(dim), groupsOver({axis}));
        tag(scatter);
        value = scatter.getResult();
        local.axes[dim].push_back(axis);
        llvm::erase(local.partialAxes, axis);
        if (local.partialAxes.empty())
          local.partial = PartialKind::none;
        break;
      }
    }
    if (local.partial != PartialKind::none) {
      auto reduction = local.partial == PartialKind::sum
                           ? CollectiveReduction::sum
                           : CollectiveReduction::max;
      auto reduce =
          builder.create<AllReduceOp>(loc, value.getType(), reduction, value,
                                      groupsOver(local.partialAxes));
      tag(reduce);
      value = reduce.getResult();
    }
    if (Value moved = moveAxis(builder, loc, value, local.axes, target, tag))
      return moved;
    // Gather every axis that goes (minor first) before slicing any that
    // comes: an axis may move from one dimension to another, and must not
    // split two at once.
    DimAxes current = local.axes;
    SmallVector<size_t> common(target.size(), 0);
    for (unsigned dim = 0; dim < target.size(); ++dim) {
      AxisList &have = current[dim];
      const AxisList &want = target[dim];
      while (common[dim] < have.size() && common[dim] < want.size() &&
             have[common[dim]] == want[common[dim]])
        ++common[dim];
      while (have.size() > common[dim]) {
        StringAttr axis = have.back();
        auto type = cast<RankedTensorType>(value.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[dim] *= mesh.getAxisSize(axis.getValue());
        auto gather = builder.create<AllGatherOp>(
            loc, RankedTensorType::get(shape, type.getElementType()), value,
            builder.getI64IntegerAttr(dim), groupsOver({axis}));
        tag(gather);
        value = gather.getResult();
        have.pop_back();
      }
    }
    for (unsigned dim = 0; dim < target.size(); ++dim)
      for (size_t index = common[dim]; index < target[dim].size(); ++index)
        value = sliceAlong(builder, loc, value, dim, target[dim][index]);
    return value;
  }

  /// `value` (split by `have`) split by `target` instead, where one axis
  /// moves from the minor split of one dimension to the minor split of
  /// another and nothing else changes: one all_to_all, in which each rank
  /// sends each other the part of its block the other's new block needs
  /// ((n-1)/n of its block, where gathering and slicing would receive
  /// (n-1)/n of the gathered tensor). Null for any other change.
  ///
  /// The block is cut along the new dimension into n pieces, which go
  /// first (reshape, transpose); the all_to_all sends piece j to group rank
  /// j; what arrives from rank i is rank i's block along the old
  /// dimension, so the leading n is moved before it and merged with it.
  Value moveAxis(OpBuilder &builder, Location loc, Value value,
                 const DimAxes &have, const DimAxes &target,
                 function_ref<void(Operation *)> tag) {
    int64_t from = -1, to = -1;
    StringAttr axis;
    for (unsigned dim = 0; dim < have.size(); ++dim) {
      if (have[dim] == target[dim])
        continue;
      ArrayRef<StringAttr> mine(have[dim]), wanted(target[dim]);
      if (mine.size() == wanted.size() + 1 && mine.drop_back() == wanted &&
          from < 0)
        from = dim, axis = mine.back();
      else if (wanted.size() == mine.size() + 1 && wanted.drop_back() == mine &&
               to < 0)
        to = dim;
      else
        return {};
    }
    if (from < 0 || to < 0 || target[to].back() != axis)
      return {};
    auto type = cast<RankedTensorType>(value.getType());
    int64_t parts = mesh.getAxisSize(axis.getValue());
    int64_t rank = type.getRank();
    if (type.getDimSize(to) % parts != 0)
      return {};
    Type element = type.getElementType();
    // [..., parts, to / parts, ...], then the parts first.
    SmallVector<int64_t> cut(type.getShape());
    cut[to] /= parts;
    cut.insert(cut.begin() + to, parts);
    Value pieces = builder.create<ReshapeOp>(
        loc, RankedTensorType::get(cut, element), value);
    SmallVector<int64_t> first = {to};
    for (int64_t dim = 0; dim <= rank; ++dim)
      if (dim != to)
        first.push_back(dim);
    SmallVector<int64_t> firstShape;
    for (int64_t dim : first)
      firstShape.push_back(cut[dim]);
    auto piecesType = RankedTensorType::get(firstShape, element);
    auto transpose = [&](Value input, Type type,
                         ArrayRef<int64_t> perm) -> Value {
      if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
        return input;
      return builder
          .create<TransposeOp>(loc, type, input,
                               builder.getDenseI64ArrayAttr(perm))
          .getResult();
    };
    Value sent = transpose(pieces, piecesType, first);
    auto exchange =
        builder.create<AllToAllOp>(loc, piecesType, sent, groupsOver({axis}));
    tag(exchange);
    Value received = exchange.getResult();
    // Dimension d of the block is dimension d + 1 of what arrived; the
    // leading one (the sender) goes right before the old dimension.
    SmallVector<int64_t> back;
    for (int64_t dim = 0; dim < from; ++dim)
      back.push_back(dim + 1);
    back.push_back(0);
    for (int64_t dim = from; dim < rank; ++dim)
      back.push_back(dim + 1);
    SmallVector<int64_t> backShape;
    for (int64_t dim : back)
      backShape.push_back(firstShape[dim]);
    Value ordered =
        transpose(received, RankedTensorType::get(backShape, element), back);
    SmallVector<int64_t> local(type.getShape());
    local[from] *= parts;
    local[to] /= parts;
    return builder.create<ReshapeOp>(loc, RankedTensorType::get(local, element),
                                     ordered);
  }

  /// This rank's block of `value` along `dim`, split over `axis`: a gather
  /// of the block at the rank's coordinate (no communication).
  Value sliceAlong(OpBuilder &builder, Location loc, Value value, unsigned dim,
                   StringAttr axis) {
    auto type = cast<RankedTensorType>(value.getType());
    int64_t parts = mesh.getAxisSize(axis.getValue());
    SmallVector<int64_t> blocks(type.getShape());
    blocks[dim] /= parts;
    blocks.insert(blocks.begin() + dim, parts);
    Value split = builder.create<ReshapeOp>(
        loc, RankedTensorType::get(blocks, type.getElementType()), value);
    Value index = coordinate(builder, loc, axis);
    Value block = builder.create<GatherOp>(
        loc, split, index, builder.getI64IntegerAttr(dim), IntegerAttr());
    SmallVector<int64_t> local(type.getShape());
    local[dim] /= parts;
    return builder.create<ReshapeOp>(
        loc, RankedTensorType::get(local, type.getElementType()), block);
  }

  Local &stateOf(Value global) {
    auto it = locals.find(global);
    if (it == locals.end()) {
      // Defined outside what was partitioned: replicated as it is.
      auto type = cast<RankedTensorType>(global.getType());
      it = locals.try_emplace(global, Local{global, DimAxes(type.getRank())})
               .first;
    }
    return it->second;
  }

  /// Whether `op` is of a kind that may take a partial operand.
  static bool isLinearKind(Operation *op) {
    return isa<ReshapeOp, TransposeOp, NegOp, SliceOp, AddOp, SubOp, MulOp,
               DivOp, MatmulOp>(op) ||
           isWidening(op);
  }

  /// A cast that a partial sum may pass, to be reduced after it: the
  /// widening of a parameter's gradient (bf16 to f32), as a bf16 GEMM's
  /// weight gradient is summed over data-parallel ranks in f32 (mixed
  /// precision's gradients of f32 master weights, as PyTorch's DDP reduces
  /// them). Other widenings, of activations and their gradients (a
  /// row-parallel GEMM's output joining the f32 residual stream), take the
  /// sum reduced before them, in bf16 as Megatron reduces them: half the
  /// bytes, and the sum rounded to bf16 as one rank's GEMM rounds it.
  static bool isWidening(Operation *op) {
    auto widen = dyn_cast<CastOp>(op);
    if (!widen)
      return false;
    // A gradient rounded to bf16 to be kept and reduced in bf16
    // (loom-build-train-step's gradient-precision): each rank rounds its
    // partial sum, as one rank rounds each microbatch's gradient, and the
    // ranks' bf16 values are summed.
    if (widen->hasAttr(LoomDialect::kKeptGradientAttrName))
      return true;
    if (!widen->hasAttr(LoomDialect::kParameterGradientAttrName))
      return false;
    auto from = dyn_cast<FloatType>(
        cast<RankedTensorType>(widen.getInput().getType()).getElementType());
    auto to = dyn_cast<FloatType>(
        cast<RankedTensorType>(widen.getType()).getElementType());
    return from && to && to.getWidth() > from.getWidth();
  }

  /// Which operands of `op` may stay partial (the op is linear in them);
  /// empty when none may. A partial value that some consumer needs whole
  /// is reduced once for all of them instead, so that the linear ones do
  /// not each carry, and later reduce, their own partial copy.
  SmallVector<bool> partialOperands(Operation *op) {
    SmallVector<bool> accepts = linearOperands(op);
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (accepts[index] &&
          !llvm::all_of(operand.getUsers(),
                        [](Operation *user) { return isLinearKind(user); }))
        accepts[index] = false;
    // An add of partial sums needs both to stay partial.
    if (isa<AddOp, SubOp>(op) && accepts.size() == 2 &&
        accepts[0] != accepts[1])
      accepts[0] = accepts[1] = false;
    return accepts;
  }

  SmallVector<bool> linearOperands(Operation *op) {
    SmallVector<bool> accepts(op->getNumOperands(), false);
    auto partialOf = [&](Value value) {
      auto it = locals.find(value);
      return it == locals.end() ? PartialKind::none : it->second.partial;
    };
    if (isa<ReshapeOp, TransposeOp, NegOp, SliceOp>(op) || isWidening(op)) {
      accepts[0] = partialOf(op->getOperand(0)) == PartialKind::sum;
      return accepts;
    }
    if (isa<AddOp, SubOp>(op)) {
      // Both partial over the same axes: the sum of partial sums.
      const Local *lhs = locals.count(op->getOperand(0))
                             ? &locals.find(op->getOperand(0))->second
                             : nullptr;
      const Local *rhs = locals.count(op->getOperand(1))
                             ? &locals.find(op->getOperand(1))->second
                             : nullptr;
      if (lhs && rhs && lhs->partial == PartialKind::sum &&
          rhs->partial == PartialKind::sum &&
          lhs->partialAxes == rhs->partialAxes &&
          globalTypeOf(op->getOperand(0)) == globalTypeOf(op->getResult(0)) &&
          globalTypeOf(op->getOperand(1)) == globalTypeOf(op->getResult(0)))
        accepts[0] = accepts[1] = true;
      return accepts;
    }
    if (isa<MulOp, MatmulOp, DivOp>(op)) {
      // Linear in one operand while the other is whole. An elementwise
      // product only by a scalar: mixing the partial value with whole data
      // elementwise (a normalization's backward) would carry the partial
      // state into several reductions, each reduced on its own, where
      // reducing the value once serves them all.
      bool lhs = partialOf(op->getOperand(0)) == PartialKind::sum;
      bool rhs = partialOf(op->getOperand(1)) == PartialKind::sum;
      Value other = op->getOperand(lhs ? 1 : 0);
      bool scalar =
          cast<RankedTensorType>(globalTypeOf(other)).getNumElements() == 1;
      if (lhs != rhs && !(rhs && isa<DivOp>(op)) &&
          (isa<MatmulOp>(op) || scalar))
        accepts[lhs ? 0 : 1] = true;
      return accepts;
    }
    return accepts;
  }

  LogicalResult partitionOp(Operation *op);
  LogicalResult partitionLookup(GatherOp gather, const AxisList &axes,
                                OpBuilder &builder);
  std::optional<LogicalResult> partitionLoss(Operation *op, OpBuilder &builder);
  LogicalResult partitionScatter(ScatterAddOp scatter, const AxisList &axes,
                                 OpBuilder &builder);

  /// Replaces `op`'s one result by `local.value`, which a rule built from
  /// other ops, with `local` as its state and the old result's decision;
  /// `op` is erased once the walk is done.
  void replaceByRule(Operation *op, const Local &local) {
    Value old = op->getResult(0);
    old.replaceAllUsesWith(local.value);
    locals[local.value] = local;
    // A copy first: inserting the new key may grow the map and move the
    // old entry that a reference would point into.
    Decision decision = decisions.lookup(old);
    decisions[local.value] = std::move(decision);
    replaced.push_back(op);
  }

  /// The first global index of this rank's block of a dimension of size
  /// `size` split over `axis`, as a tensor<1xi64>.
  Value blockOffset(OpBuilder &builder, Location loc, StringAttr axis,
                    int64_t size) {
    Value index = coordinate(builder, loc, axis);
    int64_t block = size / mesh.getAxisSize(axis.getValue());
    auto type = RankedTensorType::get({1}, builder.getI64Type());
    Value blockSize = builder.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, ArrayRef<int64_t>{block}));
    return builder.create<MulOp>(loc, index, blockSize);
  }

  /// `dims` without any of `axes`.
  static DimAxes withoutAxes(DimAxes dims, ArrayRef<StringAttr> axes) {
    for (AxisList &split : dims)
      llvm::erase_if(split, [&](StringAttr axis) {
        return llvm::is_contained(axes, axis);
      });
    return dims;
  }

  /// Brings `value` to `target` (not partial).
  Value bring(OpBuilder &builder, Location loc, Value value,
              const DimAxes &target) {
    Local state = stateOf(value);
    if (state.partial == PartialKind::none && state.axes == target)
      return state.value;
    return convert(builder, loc, value, state, target, originOf(value));
  }

  /// Brings `value` whole (not split, not partial), for the ops that need
  /// an operand whole.
  Value whole(OpBuilder &builder, Location loc, Value value) {
    return bring(builder, loc, value, DimAxes(stateOf(value).axes.size()));
  }

  ModuleOp module;
  /// The module's symbols, looked up once per read and assign.
  SymbolTable &symbols;
  func::FuncOp func;
  MeshAttr mesh;
  /// groupsOver's answers, by the axes asked about.
  std::map<std::vector<const void *>, ArrayAttr> groupsByAxes;
  FlatSymbolRefAttr meshName;
  MLIRContext *context;
  DenseMap<Value, Local> locals;
  DenseMap<Value, Decision> decisions;
  DenseMap<Operation *, FactorRule> rules;
  std::map<std::pair<void *, std::string>, Value> conversions;
  /// equivalentOf's: each value's first equivalent, and the first value of
  /// each (op, type, equivalent input).
  llvm::DenseMap<Value, Value> equivalents;
  std::map<std::tuple<const void *, const void *, const void *>, Value>
      firstEquivalent;
  /// Ops a rule rebuilt from other ops, erased once the walk is done.
  SmallVector<Operation *> replaced;
};

/// Drops propagation's attributes from `op` (its decisions were recorded
/// up front: recordDecisions), in one new attribute dictionary: each
/// removeAttr makes one, and they were a sixth of the pass.
static void dropShardingAttrs(Operation *op) {
  NamedAttrList attrs(op->getDiscardableAttrDictionary());
  bool erased = false;
  for (StringRef name :
       {LoomDialect::kShardingAttrName, LoomDialect::kShardingOriginAttrName,
        LoomDialect::kFactorShardingAttrName})
    erased |= bool(attrs.erase(name));
  if (erased)
    op->setDiscardableAttrs(attrs.getDictionary(op->getContext()));
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  // Propagation's decision is read here once; no partitioned op keeps it.
  auto decided =
      op->getAttrOfType<ArrayAttr>(LoomDialect::kFactorShardingAttrName);
  dropShardingAttrs(op);
  OpBuilder builder(op);
  Location loc = op->getLoc();

  // Pins and reshards: bring the operand to the stated sharding.
  if (isa<ShardOp, ReshardOp>(op)) {
    Value input = op->getOperand(0);
    auto sharding = op->getAttrOfType<ShardingAttr>("sharding");
    DimAxes target = dimAxesOf(sharding);
    Value moved = convert(builder, loc, input, stateOf(input), target,
                          originOf(op->getResult(0)));
    locals[op->getResult(0)] = Local{moved, target};
    return success();
  }

  // A constant stays whole (consumers slice what they need), except that
  // a split splat is simply the smaller splat.
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto type = cast<RankedTensorType>(constant.getType());
    auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
    DimAxes axes = wantedOf(constant.getResult());
    if (!value || !value.isSplat())
      axes = DimAxes(type.getRank());
    auto local = RankedTensorType::get(localShape(type.getShape(), axes, mesh),
                                       type.getElementType());
    if (local != type) {
      constant.setValueAttr(value.resizeSplat(local));
      constant.getResult().setType(local);
    }
    locals[constant.getResult()] = Local{constant.getResult(), axes};
    return success();
  }

  if (auto param = dyn_cast<ParamOp>(op)) {
    auto parameter = symbols.lookup<ParameterOp>(param.getNameAttr().getAttr());
    DimAxes axes = DimAxes(param.getType().getRank());
    if (std::optional<ShardingAttr> sharding = parameter.getSharding())
      axes = dimAxesOf(*sharding);
    param.getResult().setType(RankedTensorType::get(
        localShape(param.getType().getShape(), axes, mesh),
        param.getType().getElementType()));
    locals[param.getResult()] = Local{param.getResult(), axes};
    return success();
  }

  if (auto assign = dyn_cast<AssignOp>(op)) {
    auto parameter =
        symbols.lookup<ParameterOp>(assign.getNameAttr().getAttr());
    auto type = cast<RankedTensorType>(assign.getValue().getType());
    DimAxes axes = DimAxes(type.getRank());
    if (std::optional<ShardingAttr> sharding = parameter.getSharding())
      axes = dimAxesOf(*sharding);
    Value value = assign.getValue();
    assign.getValueMutable().assign(
        convert(builder, loc, value, stateOf(value), axes, originOf(value)));
    return success();
  }

  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      if (!isa<RankedTensorType>(value.getType()))
        continue;
      operand.set(
          convert(builder, loc, value, stateOf(value),
                  DimAxes(cast<RankedTensorType>(value.getType()).getRank()),
                  originOf(value)));
    }
    return success();
  }

  auto ruleOp = dyn_cast<FactorRuleOpInterface>(op);
  if (!ruleOp)
    return op->emitOpError("has no factor rule; loom-partition cannot "
                           "partition it");
  if (isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
          CollectiveBroadcastOp, SendOp, RecvOp>(op))
    return op->emitOpError("is already a collective; loom-partition expects "
                           "the single-device program");
  if (isa<CrossEntropyOp, CrossEntropyGradOp>(op))
    if (std::optional<LogicalResult> done = partitionLoss(op, builder))
      return *done;

  const FactorRule &rule = rules.find(op)->second;
  size_t numFactors = rule.getFactors().size();

  // The factors' axes: as propagation decided them at this op, or, for a
  // module annotated by hand, the results' wanted shardings for the factors
  // they have and the operands' for the others (contracted, reduced).
  FactorAxes factors(numFactors);
  SmallVector<StringRef> factorOrigins(numFactors);

  if (decided && decided.size() == numFactors) {
    for (auto [factor, axes] : llvm::enumerate(decided))
      for (Attribute axis : cast<ArrayAttr>(axes))
        factors[factor].push_back(cast<StringAttr>(axis));
    // Where each split that no result has comes from.
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      for (const SmallVector<unsigned, 2> &dim : rule.getOperands()[index])
        for (unsigned factor : dim)
          if (factorOrigins[factor].empty() && !factors[factor].empty())
            factorOrigins[factor] = originOf(operand);
  } else {
    SmallVector<bool> known(numFactors, false);
    for (auto [index, result] : llvm::enumerate(op->getResults())) {
      FactorAxes axes = tensorFactorAxes(rule.getResults()[index],
                                         wantedOf(result), rule, mesh);
      for (const SmallVector<unsigned, 2> &dim : rule.getResults()[index])
        for (unsigned factor : dim)
          if (!known[factor]) {
            factors[factor] = axes[factor];
            known[factor] = true;
          }
    }
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      FactorAxes axes = tensorFactorAxes(rule.getOperands()[index],
                                         wantedOf(operand), rule, mesh);
      for (const SmallVector<unsigned, 2> &dim : rule.getOperands()[index])
        for (unsigned factor : dim)
          if (!known[factor] && !axes[factor].empty()) {
            factors[factor] = axes[factor];
            known[factor] = true;
            factorOrigins[factor] = originOf(operand);
          }
    }
  }
  llvm::SmallDenseSet<StringAttr> used;
  for (unsigned factor = 0; factor < numFactors; ++factor) {
    AxisList &axes = factors[factor];
    if (rule.getFactors()[factor].kind == FactorKind::NeedReplication)
      axes.clear();
    auto clash = llvm::find_if(
        axes, [&](StringAttr axis) { return used.contains(axis); });
    axes.erase(clash, axes.end());
    used.insert(axes.begin(), axes.end());
  }
  dropInexpressible(factors, rule, mesh);

  // A gather whose table is split along the gathered rows is the
  // vocabulary-parallel embedding.
  if (auto gather = dyn_cast<GatherOp>(op)) {
    unsigned rows = rule.getOperands()[0][gather.getAxis()][0];
    if (!factors[rows].empty())
      return partitionLookup(gather, factors[rows], builder);
  }
  // Its adjoint, into a table split along the rows.
  if (auto scatter = dyn_cast<ScatterAddOp>(op)) {
    unsigned rows = rule.getResults()[0][0][0];
    if (!factors[rows].empty())
      return partitionScatter(scatter, factors[rows], builder);
  }

  // Operands.
  SmallVector<bool> keepsPartial = partialOperands(op);
  // An op that passes partial sums on computes on whole blocks along their
  // partial axes: the split over such an axis is left to the consumer that
  // needs the value whole, which reduces and scatters it once.
  llvm::SmallDenseSet<StringAttr> passedPartial;
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    if (keepsPartial[index]) {
      const Local &state = stateOf(operand);
      if (state.partial != PartialKind::none)
        passedPartial.insert(state.partialAxes.begin(),
                             state.partialAxes.end());
    }
  if (!passedPartial.empty()) {
    for (AxisList &axes : factors) {
      auto first = llvm::find_if(
          axes, [&](StringAttr axis) { return passedPartial.contains(axis); });
      axes.erase(first, axes.end());
    }
    dropInexpressible(factors, rule, mesh);
  }
  PartialKind inheritedPartial = PartialKind::none;
  AxisList inheritedAxes;
  for (auto [index, operand] : llvm::enumerate(op->getOpOperands())) {
    Value global = operand.get();
    Local state = stateOf(global);
    DimAxes target =
        tensorDimAxes(rule.getOperands()[index], factors, rule, mesh);
    // A value cannot be split over an axis it is still a partial sum
    // over (the ranks' blocks would be summed as if they were the same
    // block): such an operand is reduced (and scattered) first.
    bool splitOverPartial = llvm::any_of(target, [&](const AxisList &axes) {
      return llvm::any_of(axes, [&](StringAttr axis) {
        return llvm::is_contained(state.partialAxes, axis);
      });
    });
    if (keepsPartial[index] && state.partial != PartialKind::none &&
        !splitOverPartial) {
      inheritedPartial = state.partial;
      inheritedAxes = state.partialAxes;
      Local dims = state;
      dims.partial = PartialKind::none;
      dims.partialAxes.clear();
      Value moved = dims.axes == target ? state.value
                                        : convert(builder, loc, global, dims,
                                                  target, originOf(global));
      operand.set(moved);
      continue;
    }
    bool same = state.partial == PartialKind::none && state.axes == target;
    operand.set(
        same ? state.value
             : convert(builder, loc, global, state, target, originOf(global)));
  }

  // Results: local types, and partial where a split factor is summed away.
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    DimAxes axes = tensorDimAxes(rule.getResults()[index], factors, rule, mesh);
    Local state{result, axes};
    llvm::SmallDenseSet<unsigned> present;
    for (const SmallVector<unsigned, 2> &dim : rule.getResults()[index])
      present.insert(dim.begin(), dim.end());
    for (unsigned factor = 0; factor < numFactors; ++factor) {
      if (present.contains(factor) || factors[factor].empty())
        continue;
      FactorKind kind = rule.getFactors()[factor].kind;
      PartialKind partial = kind == FactorKind::ReductionMax ? PartialKind::max
                                                             : PartialKind::sum;
      if (kind == FactorKind::Parallel || kind == FactorKind::NeedReplication)
        continue;
      if (state.partial != PartialKind::none && state.partial != partial)
        return op->emitOpError("would be both a partial sum and a partial "
                               "maximum; loom-partition cannot express it");
      state.partial = partial;
      state.partialAxes.append(factors[factor].begin(), factors[factor].end());
      // A partial value is explained by the split it sums over.
      Decision &decision = decisions[result];
      if (decision.origin.empty() && !factorOrigins[factor].empty())
        decision.origin =
            StringAttr::get(op->getContext(),
                            "summed over a split from " + factorOrigins[factor])
                .getValue();
    }
    if (inheritedPartial != PartialKind::none) {
      if (state.partial != PartialKind::none)
        return op->emitOpError("combines a partial operand with a split "
                               "contraction; loom-partition cannot express "
                               "it");
      state.partial = inheritedPartial;
      state.partialAxes = inheritedAxes;
    }
    result.setType(RankedTensorType::get(
        localShape(type.getShape(), axes, mesh), type.getElementType()));
    locals[result] = state;
  }

  // A mean over a split dimension is each rank's mean of its block: scaled
  // by the block's share of the count, the ranks' values sum to the mean.
  bool isMean = isa<ReduceMeanOp>(op);
  if (auto loss = dyn_cast<CrossEntropyOp>(op))
    isMean = loss.getReduction() == LossReduction::mean;
  if (isMean) {
    int64_t shards = 1;
    for (unsigned factor = 0; factor < numFactors; ++factor)
      if (rule.getFactors()[factor].kind == FactorKind::ReductionSum)
        shards *= axesSize(mesh, factors[factor]);
    if (shards > 1) {
      if (auto loss = dyn_cast<CrossEntropyOp>(op);
          loss && loss.getIgnoreIndex())
        return op->emitOpError("averages over samples split across ranks while "
                               "ignoring some: the count is not known locally; "
                               "loom-partition cannot split it");
      Value result = op->getResult(0);
      auto type = cast<RankedTensorType>(result.getType());
      builder.setInsertionPointAfter(op);
      Value share = builder.create<ConstantOp>(
          op->getLoc(),
          DenseElementsAttr::get(
              RankedTensorType::get({}, type.getElementType()),
              builder.getFloatAttr(type.getElementType(), 1.0 / shards)));
      Value scaled = builder.create<MulOp>(op->getLoc(), result, share);
      result.replaceAllUsesExcept(scaled, scaled.getDefiningOp());
      // Copies first: inserting a key may grow the map under a reference.
      Local local = locals.lookup(result);
      local.value = scaled;
      locals[scaled] = std::move(local);
      Decision decision = decisions.lookup(result);
      decisions[scaled] = std::move(decision);
    }
  }

  // Shape attributes that follow the local shapes.
  // A slice keeps whole the dimensions it may split (its factor rule), so
  // their limits are the local sizes.
  if (auto slice = dyn_cast<SliceOp>(op)) {
    auto global = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> limits(slice.getLimits());
    for (auto [dim, axes] : llvm::enumerate(locals[slice.getResult()].axes))
      if (!axes.empty())
        limits[dim] = global.getDimSize(dim);
    slice.setLimits(limits);
  }
  // A split dropout draws its block of the global tensor's mask.
  if (auto dropout = dyn_cast<DropoutOp>(op)) {
    const DimAxes &axes = locals[dropout.getOutput()].axes;
    bool split =
        llvm::any_of(axes, [](const AxisList &dim) { return !dim.empty(); });
    if (split && dropout.getOffsets())
      return op->emitOpError("is already a block of a split tensor (it has "
                             "offsets); loom-partition cannot split it again");
    if (split) {
      auto global = cast<RankedTensorType>(globalTypeOf(dropout.getOutput()));
      builder.setInsertionPoint(op);
      dropout.getOffsetsMutable().assign(
          blockOffsets(builder, op->getLoc(), global.getShape(), axes));
      dropout.setGlobalShape(global.getShape());
    }
  }
  return success();
}

LogicalResult Partitioner::partitionLookup(GatherOp gather,
                                           const AxisList &axes,
                                           OpBuilder &builder) {
  Location loc = gather.getLoc();
  if (axes.size() != 1)
    return gather.emitOpError("gathers rows of a table split over several "
                              "axes; the vocabulary-parallel lookup splits "
                              "over one");
  Value table = gather.getInput();
  auto globalTable = cast<RankedTensorType>(globalTypeOf(table));
  DimAxes tableAxes(globalTable.getRank());
  tableAxes[gather.getAxis()] = axes;
  Value localTable = bring(builder, loc, table, tableAxes);
  // The indices keep their other splits (the batch over dp): each rank
  // looks up its own rows' indices in its block of the table.
  DimAxes indexAxes = withoutAxes(stateOf(gather.getIndices()).axes, axes);
  Value indices = bring(builder, loc, gather.getIndices(), indexAxes);
  Value offset = blockOffset(builder, loc, axes.front(),
                             globalTable.getDimSize(gather.getAxis()));
  Value looked =
      buildVocabParallelLookup(builder, gather, localTable, indices, offset,
                               globalTable.getDimSize(gather.getAxis()));
  Value result = gather.getResult();
  DimAxes resultAxes;
  for (int64_t dim = 0; dim < globalTable.getRank(); ++dim) {
    if (dim != int64_t(gather.getAxis()))
      resultAxes.push_back(AxisList());
    else
      resultAxes.append(indexAxes.begin(), indexAxes.end());
  }
  Local local{looked, resultAxes, PartialKind::sum, axes};
  Decision &decision = decisions[result];
  if (decision.origin.empty())
    decision.origin =
        StringAttr::get(gather->getContext(),
                        "vocabulary-parallel lookup of a table split by " +
                            originOf(table))
            .getValue();
  replaceByRule(gather, local);
  return success();
}

LogicalResult Partitioner::partitionScatter(ScatterAddOp scatter,
                                            const AxisList &axes,
                                            OpBuilder &builder) {
  Location loc = scatter.getLoc();
  if (axes.size() != 1)
    return scatter.emitOpError("scatters into rows split over several axes; "
                               "the vocabulary-parallel scatter splits over "
                               "one");
  auto global = cast<RankedTensorType>(globalTypeOf(scatter.getResult()));
  int64_t globalRows = global.getDimSize(0);
  int64_t rows = globalRows / mesh.getAxisSize(axes.front().getValue());
  // Indices and updates keep their other splits (the batch over dp): each
  // rank scatters its own rows, a partial sum over the axes that split
  // them.
  DimAxes indexAxes = withoutAxes(stateOf(scatter.getIndices()).axes, axes);
  auto updatesType = cast<RankedTensorType>(scatter.getUpdates().getType());
  DimAxes updateAxes = indexAxes;
  updateAxes.resize(updatesType.getRank());
  Value updates = bring(builder, loc, scatter.getUpdates(), updateAxes);
  Value indices = bring(builder, loc, scatter.getIndices(), indexAxes);
  Value offset = blockOffset(builder, loc, axes.front(), globalRows);
  Value result = buildVocabParallelScatterAdd(
      builder, scatter, updates, indices, offset, rows, globalRows);
  DimAxes dims(global.getRank());
  dims[0] = axes;
  Local local{result, dims};
  for (const AxisList &split : indexAxes)
    local.partialAxes.append(split.begin(), split.end());
  if (!local.partialAxes.empty())
    local.partial = PartialKind::sum;
  replaceByRule(scatter, local);
  return success();
}

std::optional<LogicalResult> Partitioner::partitionLoss(Operation *op,
                                                        OpBuilder &builder) {
  Value logits = op->getOperand(0);
  Local state = stateOf(logits);
  auto globalLogits = cast<RankedTensorType>(globalTypeOf(logits));
  int64_t last = globalLogits.getRank() - 1;
  // Logits split on their classes by one axis; their samples may be split
  // too (the batch over dp), by other axes.
  if (state.partial != PartialKind::none || state.axes[last].size() != 1)
    return std::nullopt;
  StringAttr axis = state.axes[last].front();
  DimAxes sampleAxes(state.axes.begin(), state.axes.end() - 1);
  for (const AxisList &split : sampleAxes)
    if (llvm::is_contained(split, axis))
      return std::nullopt;
  Location loc = op->getLoc();
  Value labels = bring(builder, loc, op->getOperand(1), sampleAxes);
  Value offset = blockOffset(builder, loc, axis, globalLogits.getDimSize(last));
  ArrayAttr groups = groupsOver({axis});
  DimAxes none(globalLogits.getRank());
  DictionaryAttr info =
      describe(logits, state, none,
               ("vocabulary-parallel cross-entropy of logits split by " +
                originOf(logits))
                   .str());
  Value result;
  Local local;
  int64_t sampleShards = 1;
  AxisList sampleSplit;
  for (const AxisList &split : sampleAxes) {
    sampleShards *= axesSize(mesh, split);
    sampleSplit.append(split.begin(), split.end());
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    if (sampleShards > 1 && loss.getIgnoreIndex() &&
        loss.getReduction() == LossReduction::mean)
      return op->emitOpError("averages over samples split across ranks while "
                             "ignoring some: the count is not known locally; "
                             "loom-partition cannot split it");
    result = buildVocabParallelCrossEntropy(builder, loss, state.value, labels,
                                            offset, groups, info);
    if (loss.getReduction() == LossReduction::none) {
      local = Local{result, sampleAxes};
    } else {
      // Each rank's sum (or mean, scaled by its share of the samples) is
      // a partial sum over the axes that split the samples.
      if (loss.getReduction() == LossReduction::mean && sampleShards > 1) {
        auto type = cast<RankedTensorType>(result.getType());
        Value share = builder.create<ConstantOp>(
            loc, DenseElementsAttr::get(
                     RankedTensorType::get({}, type.getElementType()),
                     builder.getFloatAttr(type.getElementType(),
                                          1.0 / sampleShards)));
        result = builder.create<MulOp>(loc, result, share);
      }
      local = Local{result, DimAxes(loss.getType().getRank())};
      if (sampleShards > 1) {
        local.partial = PartialKind::sum;
        local.partialAxes = sampleSplit;
      }
    }
  } else {
    auto grad = cast<CrossEntropyGradOp>(op);
    auto scaleType = cast<RankedTensorType>(grad.getScale().getType());
    Value scale = scaleType.getRank() == 0
                      ? whole(builder, loc, grad.getScale())
                      : bring(builder, loc, grad.getScale(), sampleAxes);
    result = buildVocabParallelCrossEntropyGrad(
        builder, grad, state.value, labels, scale, offset, groups, info);
    local = Local{result, state.axes};
  }
  replaceByRule(op, local);
  return success();
}

LogicalResult Partitioner::run() {
  recordDecisions();
  // Inputs arrive whole on every rank (splitting the batch is data
  // parallelism's, with its row offsets): an op that wants one split
  // slices it locally.
  for (BlockArgument argument : func.getArguments()) {
    auto type = cast<RankedTensorType>(argument.getType());
    DimAxes axes(type.getRank());
    // An argument pinned split on its batch dimension alone (the data-
    // parallel tactic's pin, its only use) arrives as this rank's rows: it
    // gets its local type and the batch row each rank's rows start at.
    if (argument.hasOneUse())
      if (auto pin = dyn_cast<ShardOp>(*argument.getUsers().begin())) {
        DimAxes wanted = dimAxesOf(pin.getSharding());
        if (pin.getSharding().getPartialKind() == PartialKind::none &&
            !wanted.empty() && !wanted[0].empty() &&
            llvm::all_of(llvm::drop_begin(wanted),
                         [](const AxisList &dim) { return dim.empty(); })) {
          axes = wanted;
          SmallVector<int64_t> local =
              localShape(type.getShape(), wanted, mesh);
          argument.setType(RankedTensorType::get(local, type.getElementType()));
          SmallVector<int64_t> offsets;
          for (int64_t rank = 0; rank < mesh.getNumDevices(); ++rank)
            offsets.push_back(blockIndex(rank, wanted[0]) * local[0]);
          func.setArgAttr(argument.getArgNumber(), "loom.batch_offsets",
                          DenseI64ArrayAttr::get(context, offsets));
        }
      }
    locals[argument] = Local{argument, axes};
    func.removeArgAttr(argument.getArgNumber(), LoomDialect::kShardingAttrName);
    func.removeArgAttr(argument.getArgNumber(),
                       LoomDialect::kShardingOriginAttrName);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(partitionOp(op)))
      return failure();
  // The pins are now data movement (or nothing).
  for (Operation *op : replaced)
    op->erase();
  for (Operation *op : llvm::reverse(ops))
    if (!llvm::is_contained(replaced, op) && isa<ShardOp, ReshardOp>(op)) {
      op->getResult(0).replaceAllUsesWith(locals[op->getResult(0)].value);
      op->erase();
    }
  int64_t devices = mesh.getNumDevices();
  func->setAttr(LoomDialect::kRanksAttrName,
                DenseI64ArrayAttr::get(
                    context, llvm::to_vector(llvm::seq<int64_t>(0, devices))));
  func.setType(FunctionType::get(
      context, func.getBody().front().getArgumentTypes(),
      func.getBody().front().getTerminator()->getOperandTypes()));
  return success();
}

struct PartitionPass : impl::LoomPartitionBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<loom::MeshOp> meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.empty())
      return; // nothing to partition
    if (meshes.size() > 1) {
      meshes[1].emitOpError("is a second mesh; loom-partition partitions "
                            "over one");
      return signalPassFailure();
    }
    MeshAttr mesh = meshes.front().getMesh();
    auto meshName = FlatSymbolRefAttr::get(meshes.front().getSymNameAttr());
    int64_t world = LoomDialect::getWorldSize(module);
    if (module->hasAttr(LoomDialect::kWorldSizeAttrName) &&
        world != mesh.getNumDevices()) {
      module.emitOpError("has loom.world_size ")
          << world << " but its mesh has " << mesh.getNumDevices()
          << " devices";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      Partitioner partitioner(module, symbols, func, mesh, meshName);
      if (failed(partitioner.run()))
        return signalPassFailure();
    }
    for (auto parameter : module.getOps<ParameterOp>())
      parameter->removeAttr(LoomDialect::kShardingOriginAttrName);
    module->setAttr(LoomDialect::kWorldSizeAttrName,
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     mesh.getNumDevices()));
  }
};

} // namespace
} // namespace loom
} // namespace mlir
