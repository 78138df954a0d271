//===- Bufferize.cpp - Tensors to arena buffers, ops to plan.kernel -------===//
//
// Loom functions have static shapes and no control flow, so bufferization is
// a single walk: every kernel result gets a fresh buffer (memory planning
// later makes buffers share bytes), reshapes alias their input, parameters
// and constants are weights.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUFFERIZE
#include "loom/Conversion/Passes.h.inc"

namespace {

MemRefType bufferType(Type tensor) {
  auto ranked = cast<RankedTensorType>(tensor);
  return MemRefType::get(ranked.getShape(), ranked.getElementType());
}

/// The graph name of argument or result `index`, from `onnx.name`.
std::string ioName(DictionaryAttr attrs, StringRef fallback, unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return (fallback + Twine(index)).str();
}

class FunctionBufferizer {
public:
  /// `constants`: the parameter each used constant became.
  FunctionBufferizer(func::FuncOp func,
                     const DenseMap<Operation *, StringAttr> &constants)
      : func(func), constants(constants), builder(func.getContext()) {}

  /// The argument's `loom.batch_offsets` (the batch rows each rank's input
  /// holds), checked against the ranks that run the function; null when it
  /// has none.
  FailureOr<DenseI64ArrayAttr> batchRows(unsigned index) {
    constexpr StringLiteral kName = "loom.batch_offsets";
    Attribute attr = func.getArgAttr(index, kName);
    if (!attr)
      return DenseI64ArrayAttr();
    // The dialect verifier checked the kind and the signs.
    auto rows = cast<DenseI64ArrayAttr>(attr);
    size_t ranks = LoomDialect::getRanksOf(func).size();
    if (rows.size() != int64_t(ranks))
      return func.emitError() << "argument #" << index << " has " << rows.size()
                              << " batch row offset(s) ('" << kName
                              << "'), but @" << func.getSymName() << " runs on "
                              << ranks << " rank(s): give one per rank, in "
                              << LoomDialect::kRanksAttrName << " order";
    auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[index]);
    if (!type || type.getRank() == 0)
      return func.emitError() << "argument #" << index << " has '" << kName
                              << "', but a scalar has no batch rows";
    return rows;
  }

  LogicalResult run() {
    Block &body = func.getBody().front();
    SmallVector<Operation *> old;
    for (Operation &op : body)
      old.push_back(&op);

    builder.setInsertionPointToStart(&body);
    for (BlockArgument arg : body.getArguments()) {
      std::string name = ioName(func.getArgAttrDict(arg.getArgNumber()), "arg",
                                arg.getArgNumber());
      FailureOr<DenseI64ArrayAttr> rows = batchRows(arg.getArgNumber());
      if (failed(rows))
        return failure();
      buffers.map(arg, builder.create<plan::InputOp>(
                           arg.getLoc(), bufferType(arg.getType()),
                           builder.getStringAttr(name), IntegerAttr(), *rows));
    }
    for (Operation *op : old) {
      builder.setInsertionPoint(op);
      if (failed(convert(op)))
        return failure();
    }
    for (Operation *op : llvm::reverse(old)) {
      op->dropAllUses();
      op->erase();
    }
    // Every read of each assigned parameter, collected in one walk rather
    // than one per assign (a 96-layer GPT's step has thousands of assigns
    // and tens of thousands of ops). storeAssign adds weights of the names
    // it stores, each name once, so the lists stay complete.
    for (const PendingAssign &assign : assigns)
      weightReads[assign.name.getAttr()];
    func.walk([&](plan::WeightOp weight) {
      auto reads = weightReads.find(weight.getNameAttr().getAttr());
      if (reads != weightReads.end())
        reads->second.push_back(weight.getBuffer());
    });
    for (const PendingAssign &assign : assigns)
      storeAssign(assign);
    body.eraseArguments(0, body.getNumArguments());
    func.setType(FunctionType::get(func.getContext(), {}, {}));
    func.removeArgAttrsAttr();
    func.removeResAttrsAttr();
    return success();
  }

private:
  LogicalResult convert(Operation *op) {
    Location loc = op->getLoc();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands()))
        builder.create<plan::OutputOp>(
            loc, ioName(func.getResultAttrDict(index), "result", index),
            buffers.lookup(value));
      builder.create<func::ReturnOp>(loc);
      return success();
    }
    if (auto assign = dyn_cast<AssignOp>(op)) {
      assigns.push_back(
          {assign.getNameAttr(), buffers.lookup(assign.getValue()), loc});
      return success();
    }
    if (auto param = dyn_cast<ParamOp>(op)) {
      buffers.map(param.getResult(),
                  builder.create<plan::WeightOp>(
                      loc, bufferType(param.getType()), param.getNameAttr()));
      return success();
    }
    if (auto constant = dyn_cast<ConstantOp>(op))
      return convertConstant(constant);
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      buffers.map(reshape.getResult(), builder.create<plan::ViewOp>(
                                           loc, bufferType(reshape.getType()),
                                           buffers.lookup(reshape.getInput())));
      return success();
    }
    // A slice keeping its input's leading bytes (a padded dimension cut back)
    // is a view of them rather than a copy. Not of a weight: the runtime
    // refers to a weight as a whole.
    if (auto slice = dyn_cast<SliceOp>(op); slice && slice.isLeadingPrefix()) {
      Value input = buffers.lookup(slice.getInput());
      if (!isa_and_nonnull<plan::WeightOp>(
              plan::ViewOp::getRoot(input).getDefiningOp())) {
        buffers.map(slice.getResult(),
                    builder.create<plan::ViewOp>(
                        loc, bufferType(slice.getType()), input));
        return success();
      }
    }
    auto kernel = op->getAttrOfType<StringAttr>("plan.kernel");
    if (!kernel)
      return op->emitOpError("has no kernel selected; run "
                             "-loom-select-kernels first");
    SmallVector<Value> inputs, outputs;
    for (Value operand : op->getOperands())
      inputs.push_back(buffers.lookup(operand));
    // An all-reduce of a value nothing else reads, in a buffer of its own,
    // runs in place (every engine supports it): its result needs no second
    // buffer, which matters while a gradient bucket is in flight (its
    // buffer lives until the result is first read, loom-plan-memory).
    if (auto reduce = dyn_cast<AllReduceOp>(op);
        reduce && reduce.getInput().hasOneUse() &&
        isa_and_nonnull<plan::AllocOp>(inputs.front().getDefiningOp())) {
      buffers.map(reduce.getResult(), inputs.front());
      auto attrs = op->getAttrOfType<DictionaryAttr>("plan.kernel_attrs");
      builder.create<plan::KernelOp>(
          loc, kernel, inputs, ValueRange{inputs.front()},
          attrs ? attrs : builder.getDictionaryAttr({}));
      return success();
    }
    for (Value result : op->getResults()) {
      Value buffer = builder.create<plan::AllocOp>(
          loc, bufferType(result.getType()), IntegerAttr());
      buffers.map(result, buffer);
      outputs.push_back(buffer);
    }
    auto attrs = op->getAttrOfType<DictionaryAttr>("plan.kernel_attrs");
    auto launch = builder.create<plan::KernelOp>(
        loc, kernel, inputs, outputs,
        attrs ? attrs : builder.getDictionaryAttr({}));
    if (auto fusion = dyn_cast<FusionOp>(op))
      launch.getBody().takeBody(fusion.getBody());
    return success();
  }

  /// A constant reads the (frozen) parameter it became (hoistConstants), so
  /// that every value is either in the arena or in the plan's weights.
  LogicalResult convertConstant(ConstantOp constant) {
    auto name = constants.find(constant);
    if (name == constants.end())
      return success(); // (Unused.)
    buffers.map(constant.getResult(),
                builder.create<plan::WeightOp>(
                    constant.getLoc(), bufferType(constant.getType()),
                    FlatSymbolRefAttr::get(name->second)));
    return success();
  }

  /// A loom.assign, stored once the whole function is bufferized (when every
  /// read of the parameter is known).
  struct PendingAssign {
    FlatSymbolRefAttr name;
    Value value;
    Location loc;
  };

  /// Makes the step leave `assign.value` in the parameter's weight: in place,
  /// by redirecting the kernel that computes the value into the weight, when
  /// nothing reads the old value after that kernel; else by a copy at the
  /// end of the step.
  void storeAssign(const PendingAssign &assign) {
    Block &body = func.getBody().front();
    builder.setInsertionPointToStart(&body);
    Value weight = builder.create<plan::WeightOp>(
        assign.loc, assign.value.getType(), assign.name);
    if (inPlaceWriter(assign)) {
      Operation *alloc = assign.value.getDefiningOp();
      Value value = assign.value;
      value.replaceAllUsesWith(weight);
      alloc->erase();
      return;
    }
    builder.setInsertionPoint(body.getTerminator());
    builder.create<plan::KernelOp>(assign.loc, "copy", ValueRange{assign.value},
                                   ValueRange{weight},
                                   builder.getDictionaryAttr({}));
  }

  /// The kernel that may write `assign.value` straight into the weight, or
  /// null: the value must be a fresh buffer written by one kernel, after
  /// which nothing reads the parameter's old value (an elementwise kernel
  /// may read it itself: it loads a block before storing it).
  plan::KernelOp inPlaceWriter(const PendingAssign &assign) {
    auto alloc = assign.value.getDefiningOp<plan::AllocOp>();
    if (!alloc)
      return {};
    plan::KernelOp writer;
    for (OpOperand &use : alloc->getUses()) {
      auto kernel = dyn_cast<plan::KernelOp>(use.getOwner());
      if (kernel && llvm::is_contained(kernel.getOutputs(), assign.value)) {
        if (writer)
          return {};
        writer = kernel;
      }
    }
    if (!writer)
      return {};
    SmallVector<Value> reads(weightReads.lookup(assign.name.getAttr()));
    while (!reads.empty()) {
      Value buffer = reads.pop_back_val();
      for (OpOperand &use : buffer.getUses()) {
        Operation *user = use.getOwner();
        if (auto view = dyn_cast<plan::ViewOp>(user)) {
          reads.push_back(view.getResult());
          continue;
        }
        if (user == writer.getOperation()) {
          if (writer.getKernel() != "elementwise" ||
              buffer.getType() != assign.value.getType())
            return {};
          continue;
        }
        if (!user->isBeforeInBlock(writer))
          return {};
      }
    }
    return writer;
  }

  func::FuncOp func;
  const DenseMap<Operation *, StringAttr> &constants;
  OpBuilder builder;
  IRMapping buffers;
  SmallVector<PendingAssign> assigns;
  /// The buffers of the plan.weight ops reading each assigned parameter.
  DenseMap<StringAttr, SmallVector<Value>> weightReads;
};

/// Every used constant of `funcs` as a frozen parameter of the module, in
/// the functions' order and each one's (the symbol table numbers their
/// names in that order); the parameter's name by constant.
DenseMap<Operation *, StringAttr> hoistConstants(ModuleOp module,
                                                 ArrayRef<func::FuncOp> funcs) {
  SymbolTable symbols(module);
  OpBuilder moduleBuilder(module.getBodyRegion());
  DenseMap<Operation *, StringAttr> names;
  for (func::FuncOp func : funcs)
    for (Operation &op : func.getBody().front()) {
      auto constant = dyn_cast<ConstantOp>(op);
      if (!constant || constant->use_empty())
        continue;
      moduleBuilder.setInsertionPointToStart(module.getBody());
      auto parameter = moduleBuilder.create<ParameterOp>(
          constant.getLoc(), moduleBuilder.getStringAttr("constant"),
          TypeAttr::get(constant.getType()),
          /*trainable=*/UnitAttr(), /*sharding=*/ShardingAttr(),
          constant.getValue());
      names[constant] = symbols.insert(parameter);
    }
  return names;
}

struct BufferizePass : impl::LoomBufferizeBase<BufferizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitOpError("must have a single block to be bufferized");
        return signalPassFailure();
      }
      funcs.push_back(func);
    }
    // The module's symbols change only here; then each function is
    // bufferized on its own, the ranks' programs of a pipeline at once (a
    // 64-microbatch pipeline's ranks have a million ops).
    DenseMap<Operation *, StringAttr> constants = hoistConstants(module, funcs);
    // Diagnostics in the functions' order, whichever thread reports.
    ParallelDiagnosticHandler diagnostics(&getContext());
    if (failed(failableParallelForEach(
            &getContext(), llvm::seq<size_t>(0, funcs.size()),
            [&](size_t index) {
              diagnostics.setOrderIDForThread(index);
              LogicalResult result =
                  FunctionBufferizer(funcs[index], constants).run();
              diagnostics.eraseOrderIDForThread();
              return result;
            })))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
