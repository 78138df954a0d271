//===- AttachLoss.cpp - A model's training loss function ------------------===//
//
// The loss is added as a new function rather than in place so that the
// model's own function stays what was imported (inference keeps running it)
// and the loss function can be differentiated on its own.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMATTACHLOSS
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

struct AttachLossPass : impl::LoomAttachLossBase<AttachLossPass> {
  using LoomAttachLossBase::LoomAttachLossBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto model = module.lookupSymbol<func::FuncOp>(function);
    if (!model || model.isExternal() || model.getNumResults() == 0) {
      module.emitError("no function '")
          << function << "' with a result to attach a loss to";
      return signalPassFailure();
    }
    auto output = dyn_cast<RankedTensorType>(model.getResultTypes()[0]);
    if (!output || !isa<FloatType>(output.getElementType())) {
      model.emitOpError("result #0 must be a float tensor to take a loss of");
      return signalPassFailure();
    }
    Type labelsType;
    if (kind == LossKind::CrossEntropy) {
      if (output.getRank() < 1) {
        model.emitOpError("result #0 must be logits [..., classes] for a "
                          "cross_entropy loss, got ")
            << output;
        return signalPassFailure();
      }
      labelsType = RankedTensorType::get(output.getShape().drop_back(),
                                         IntegerType::get(&getContext(), 64));
    } else if (kind == LossKind::MSE) {
      labelsType = output;
    } else if (output.getNumElements() != 1) {
      model.emitOpError("result #0 must be the scalar loss for loss 'none', "
                        "got ")
          << output;
      return signalPassFailure();
    }

    OpBuilder builder(&getContext());
    builder.setInsertionPointAfter(model);
    SmallVector<Type> inputs(model.getArgumentTypes());
    if (labelsType)
      inputs.push_back(labelsType);
    // cross_entropy's loss has its own type (f32 for bf16 logits).
    Type lossType = RankedTensorType::get(
        {}, kind == LossKind::CrossEntropy
                ? getStatisticsType(output.getElementType())
                : output.getElementType());
    SmallVector<Type> results{lossType};
    llvm::append_range(results, model.getResultTypes());
    auto lossFunction =
        builder.create<func::FuncOp>(model.getLoc(), lossFunctionName(function),
                                     builder.getFunctionType(inputs, results));
    SymbolTable(module).insert(lossFunction);

    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < model.getNumArguments(); ++i)
      argAttrs.push_back(model.getArgAttrDict(i));
    if (labelsType)
      argAttrs.push_back(builder.getDictionaryAttr(
          builder.getNamedAttr("onnx.name", builder.getStringAttr("labels"))));
    lossFunction.setAllArgAttrs(argAttrs);
    SmallVector<DictionaryAttr> resultAttrs{builder.getDictionaryAttr(
        builder.getNamedAttr("onnx.name", builder.getStringAttr("loss")))};
    for (unsigned i = 0; i < model.getNumResults(); ++i)
      resultAttrs.push_back(model.getResultAttrDict(i));
    lossFunction.setAllResultAttrs(resultAttrs);

    Block *body = lossFunction.addEntryBlock();
    builder.setInsertionPointToStart(body);
    Location loc = model.getLoc();
    auto call = builder.create<func::CallOp>(
        loc, model, body->getArguments().take_front(model.getNumArguments()));
    Value prediction = call.getResult(0);
    Value loss;
    if (kind == LossKind::CrossEntropy) {
      loss = builder.create<CrossEntropyOp>(
          loc, prediction, body->getArguments().back(), LossReduction::mean,
          /*ignore_index=*/IntegerAttr(), /*classes=*/IntegerAttr());
    } else if (kind == LossKind::MSE) {
      Value diff =
          builder.create<SubOp>(loc, prediction, body->getArguments().back());
      Value square = builder.create<MulOp>(loc, diff, diff);
      SmallVector<int64_t> axes;
      for (int64_t i = 0; i < output.getRank(); ++i)
        axes.push_back(i);
      loss = builder.create<ReduceMeanOp>(loc, square, axes, false);
    } else {
      loss = builder.create<ReshapeOp>(loc, lossType, prediction);
    }
    SmallVector<Value> returned{loss};
    llvm::append_range(returned, call.getResults());
    builder.create<func::ReturnOp>(loc, returned);

    // Loom functions are single straight-line bodies: inline the model.
    if (failed(inlineCall(call, model)))
      return signalPassFailure();
  }

  /// Replaces `call` with a copy of `callee`'s body.
  LogicalResult inlineCall(func::CallOp call, func::FuncOp callee) {
    if (!callee.getBody().hasOneBlock())
      return callee.emitOpError("must have a single block");
    IRMapping mapping;
    for (auto [arg, operand] :
         llvm::zip(callee.getArguments(), call.getOperands()))
      mapping.map(arg, operand);
    OpBuilder builder(call);
    Block &body = callee.getBody().front();
    for (Operation &op : body.without_terminator())
      builder.clone(op, mapping);
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (auto [result, value] : llvm::zip(call.getResults(), ret.getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(value));
    call.erase();
    return success();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
