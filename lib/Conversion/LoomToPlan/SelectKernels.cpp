//===- SelectKernels.cpp - Choose the runtime kernel of every op ----------===//
//
// The one place that knows which runtime kernel executes which loom op and
// how op attributes become kernel attributes; bufferization only moves the
// result into a plan.kernel. Unsupported element types are rejected here, at
// the op, rather than when a plan is loaded: the CPU kernels compute in f32
// and f64, and in bf16 (computing in f32, rounding on store) those that
// mixed precision needs: matmul, attention, elementwise and data movement.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSELECTKERNELS
#include "loom/Conversion/Passes.h.inc"

namespace {

/// A selected kernel: its name and attributes.
struct Selection {
  StringRef kernel;
  SmallVector<NamedAttribute> attrs;
};

class Selector {
public:
  explicit Selector(MLIRContext *context) : builder(context) {}

  /// The kernel for `op`; std::nullopt for ops that need none (reshape,
  /// param, constant, assign); failure after emitting an error.
  FailureOr<std::optional<Selection>> select(Operation *op) {
    if (isa<ReshapeOp, ParamOp, ConstantOp, AssignOp>(op))
      return std::optional<Selection>();
    if (isa<SGDUpdateOp, AdamWUpdateOp>(op))
      return op->emitOpError("must be expanded before kernel selection; run "
                             "-loom-expand-optimizers first");
    if (isa<GeluGradOp>(op))
      return op->emitOpError("must be decomposed before kernel selection; run "
                             "-loom-decompose-gelu-grad first");
    if (FusionOp::isFusible(op))
      return op->emitOpError("must be fused before kernel selection; run "
                             "-loom-fuse-elementwise first");
    if (isa<ShardOp>(op))
      return op->emitOpError("is a sharding annotation; partition the "
                             "function before lowering it to a plan");
    std::optional<Selection> selection =
        llvm::TypeSwitch<Operation *, std::optional<Selection>>(op)
            .Case([&](FusionOp) { return make("elementwise"); })
            .Case([&](MatmulOp matmul) {
              return make("matmul",
                          {flag("transpose_lhs", matmul.getTransposeLhs()),
                           flag("transpose_rhs", matmul.getTransposeRhs())});
            })
            .Case([&](FusedMatmulOp matmul) {
              Selection result = make(
                  "matmul", {flag("transpose_lhs", matmul.getTransposeLhs()),
                             flag("transpose_rhs", matmul.getTransposeRhs())});
              if (matmul.getActivation() != MatmulActivation::none)
                result.attrs.push_back(
                    word("activation",
                         stringifyMatmulActivation(matmul.getActivation())));
              // The addend is the last input.
              if (matmul.getAddend())
                result.attrs.push_back(integer("accumulate", 1));
              return result;
            })
            .Case([&](MatmulBiasGradOp matmul) {
              // The bias gradient is the kernel's second output.
              return make("matmul",
                          {flag("transpose_lhs", true),
                           flag("transpose_rhs", false),
                           word("bias_grad",
                                stringifyMatmulOperand(matmul.getSummed()))});
            })
            .Case([&](MatmulGeluGradOp matmul) {
              // The GELU's input is the kernel's third input.
              return make("matmul",
                          {flag("transpose_lhs", matmul.getTransposeLhs()),
                           flag("transpose_rhs", matmul.getTransposeRhs()),
                           word("activation_grad", "gelu_tanh")});
            })
            .Case([&](ReduceSumOp reduce) {
              return make("reduce_sum", {axes(reduce.getAxes())});
            })
            .Case([&](ReduceMeanOp reduce) {
              return make("reduce_mean", {axes(reduce.getAxes())});
            })
            .Case([&](ReduceMaxOp reduce) {
              return make("reduce_max", {axes(reduce.getAxes())});
            })
            .Case([&](CumsumOp cumsum) {
              return make("cumsum", {integer("axis", cumsum.getAxis()),
                                     flag("exclusive", cumsum.getExclusive()),
                                     flag("reverse", cumsum.getReverse())});
            })
            .Case([&](SoftmaxOp softmax) {
              return make("softmax", {integer("axis", softmax.getAxis())});
            })
            .Case([&](LogSoftmaxOp softmax) {
              return make("log_softmax", {integer("axis", softmax.getAxis())});
            })
            .Case([&](LayerNormOp norm) {
              return make(
                  "layer_norm",
                  {integer("axis", norm.getAxis()),
                   real("epsilon", norm.getEpsilon().convertToDouble())});
            })
            .Case([&](LayerNormGradOp grad) {
              return make(
                  "layer_norm_backward",
                  {integer("axis", grad.getAxis()),
                   real("epsilon", grad.getEpsilon().convertToDouble())});
            })
            .Case([&](FusedLayerNormGradOp grad) {
              // The addend is the kernel's fourth input, the bf16 copy its
              // fourth output.
              return make(
                  "layer_norm_backward",
                  {integer("axis", grad.getAxis()),
                   real("epsilon", grad.getEpsilon().convertToDouble())});
            })
            .Case([&](AttentionOp attention) {
              return make("attention", attentionAttrs(attention.getScale(),
                                                      attention.getMaskValue(),
                                                      attention.getSeqMajor()));
            })
            .Case([&](AttentionGradOp grad) {
              return make("attention_backward",
                          attentionAttrs(grad.getScale(), grad.getMaskValue(),
                                         grad.getSeqMajor()));
            })
            .Case([&](PackedAttentionOp attention) {
              return make("attention", packedAttrs(attention.getScale(),
                                                   attention.getMaskValue()));
            })
            .Case([&](PackedAttentionGradOp grad) {
              return make("attention_backward",
                          packedAttrs(grad.getScale(), grad.getMaskValue()));
            })
            .Case([&](ScatterAddOp) { return make("scatter_add"); })
            .Case([&](GatherOp gather) {
              return make("gather", {integer("axis", gather.getAxis())});
            })
            .Case([&](CrossEntropyOp loss) { return crossEntropy(loss); })
            .Case([&](CrossEntropyWithGradOp loss) {
              // The same kernel with the gradient's scale as a third input
              // and the gradient as a second output.
              return crossEntropy(loss);
            })
            .Case([&](CrossEntropyGradOp grad) {
              Selection result = make("cross_entropy_backward");
              if (std::optional<int64_t> ignore = grad.getIgnoreIndex())
                result.attrs.push_back(integer("ignore_index", *ignore));
              if (std::optional<int64_t> classes = grad.getClasses())
                result.attrs.push_back(integer("classes", *classes));
              return result;
            })
            .Case([&](TransposeOp transpose) {
              return make("transpose",
                          {list("permutation", transpose.getPermutation())});
            })
            .Case([&](SliceOp slice) {
              return make("slice", {list("starts", slice.getStarts()),
                                    list("strides", slice.getStrides())});
            })
            .Case([&](ConcatOp concat) {
              return make("concat", {integer("axis", concat.getAxis())});
            })
            .Case([&](SplitOp split) {
              return make("split", {integer("axis", split.getAxis())});
            })
            .Case([&](AllReduceOp op) {
              return make("all_reduce", {reduction(op.getReduction()),
                                         groups("groups", op.getGroups())});
            })
            .Case([&](AllGatherOp op) -> std::optional<Selection> {
              if (!op.movesWholeBlocks())
                return std::nullopt;
              return make("all_gather", {groups("groups", op.getGroups())});
            })
            .Case([&](ReduceScatterOp op) -> std::optional<Selection> {
              if (!op.movesWholeBlocks())
                return std::nullopt;
              return make("reduce_scatter", {reduction(op.getReduction()),
                                             groups("groups", op.getGroups())});
            })
            .Case([&](CollectiveBroadcastOp op) {
              return make("broadcast", {integer("root", op.getRoot()),
                                        groups("groups", op.getGroups())});
            })
            .Case([&](AllToAllOp op) {
              return make("all_to_all", {groups("groups", op.getGroups())});
            })
            .Case([&](SendOp op) {
              SmallVector<NamedAttribute> attrs{groups("pairs", op.getPairs()),
                                                integer("tag", op.getTag())};
              // For -loom-plan-memory, which drops it.
              if (std::optional<uint64_t> release = op.getReleasedBy())
                attrs.push_back(integer("released_by", int64_t(*release)));
              return make("send", attrs);
            })
            .Case([&](RecvOp op) {
              return make("recv", {groups("pairs", op.getPairs()),
                                   integer("tag", op.getTag())});
            })
            .Case([&](DropoutOp dropout) {
              // Inputs: X, then the step and the block's offsets when the
              // op has them (`global_shape` marks the offsets).
              Selection result =
                  make("dropout",
                       {real("ratio", dropout.getRatio().convertToDouble()),
                        integer("seed", dropout.getSeed())});
              for (auto [name, value] :
                   {std::pair<StringRef, int64_t>{"index_base",
                                                  dropout.getIndexBase()},
                    {"index_chunk", dropout.getIndexChunk()},
                    {"index_chunk_stride", dropout.getIndexChunkStride()}})
                if (value != 0)
                  result.attrs.push_back(integer(name, value));
              if (std::optional<ArrayRef<int64_t>> shape =
                      dropout.getGlobalShape())
                result.attrs.push_back(list("global_shape", *shape));
              return result;
            })
            .Default([](Operation *) { return std::nullopt; });
    if (!selection && isa<AllGatherOp, ReduceScatterOp>(op))
      return op->emitOpError("splits a dim other than the outermost one; run "
                             "-loom-decompose-collectives first");
    if (!selection)
      return op->emitOpError("has no kernel in the ") << target << " backend";
    if (failed(checkElementTypes(op, selection->kernel)))
      return failure();
    return selection;
  }

  std::string target = "cpu";

private:
  template <typename OpTy> Selection crossEntropy(OpTy loss) {
    Selection result =
        make("cross_entropy",
             {word("reduction", stringifyLossReduction(loss.getReduction()))});
    if (std::optional<int64_t> ignore = loss.getIgnoreIndex())
      result.attrs.push_back(integer("ignore_index", *ignore));
    if (std::optional<int64_t> classes = loss.getClasses())
      result.attrs.push_back(integer("classes", *classes));
    return result;
  }

  /// Kernels that take bf16 operands (and compute them in f32), and the
  /// collectives (ZeRO-3 gathers the bf16 copies of the weights; gradients
  /// kept in bf16 are reduced in bf16).
  static bool takesBF16(StringRef kernel) {
    return llvm::is_contained({"elementwise",
                               "matmul",
                               "transpose",
                               "slice",
                               "concat",
                               "split",
                               "gather",
                               "attention",
                               "attention_backward",
                               "cross_entropy",
                               "cross_entropy_backward",
                               "layer_norm",
                               "layer_norm_backward",
                               "all_gather",
                               "all_to_all",
                               "broadcast",
                               "send",
                               "recv",
                               "all_reduce",
                               "reduce_scatter"},
                              kernel);
  }

  /// Kernels that read bf16 operands into an f32 result, and write no bf16.
  static bool readsBF16(StringRef kernel) { return kernel == "reduce_sum"; }

  /// f16 runs nowhere, bf16 only in the kernels of takesBF16 (and as an
  /// operand of those of readsBF16).
  LogicalResult checkElementTypes(Operation *op, StringRef kernel) {
    auto check = [&](Type type, bool operand) -> LogicalResult {
      Type element = getElementTypeOrSelf(type);
      if (element.isF16())
        return op->emitOpError("computes in ")
               << element << ", which the " << target
               << " backend does not support (it has f32 and f64 kernels, "
                  "and bf16 ones for mixed precision)";
      if (element.isBF16() && !takesBF16(kernel) &&
          !(operand && readsBF16(kernel)))
        return op->emitOpError("computes in ")
               << element << ", which the " << target << " backend's '"
               << kernel
               << "' kernel does not support (bf16 runs in matmul, "
                  "attention, cross-entropy, layer-norm, elementwise and "
                  "data-movement kernels; compute this op in f32)";
      return success();
    };
    WalkResult result = op->walk([&](Operation *nested) {
      for (Type type : nested->getResultTypes())
        if (failed(check(type, /*operand=*/false)))
          return WalkResult::interrupt();
      for (Type type : nested->getOperandTypes())
        if (failed(check(type, /*operand=*/true)))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  Selection make(StringRef kernel, ArrayRef<NamedAttribute> attrs = {}) {
    return {kernel, SmallVector<NamedAttribute>(attrs)};
  }
  NamedAttribute integer(StringRef name, int64_t value) {
    return builder.getNamedAttr(name, builder.getI64IntegerAttr(value));
  }
  NamedAttribute flag(StringRef name, bool value) {
    return integer(name, value ? 1 : 0);
  }
  NamedAttribute real(StringRef name, double value) {
    return builder.getNamedAttr(name, builder.getF64FloatAttr(value));
  }
  NamedAttribute word(StringRef name, StringRef value) {
    return builder.getNamedAttr(name, builder.getStringAttr(value));
  }
  NamedAttribute list(StringRef name, ArrayRef<int64_t> values) {
    return builder.getNamedAttr(name, builder.getDenseI64ArrayAttr(values));
  }
  SmallVector<NamedAttribute> attentionAttrs(APFloat scale, APFloat maskValue,
                                             bool seqMajor) {
    SmallVector<NamedAttribute> attrs = {
        real("scale", scale.convertToDouble()),
        real("mask_value", maskValue.convertToDouble())};
    if (seqMajor)
      attrs.push_back(integer("seq_major", 1));
    return attrs;
  }
  /// A packed attention is a seq-major one whose q, k and v are one
  /// operand.
  SmallVector<NamedAttribute> packedAttrs(APFloat scale, APFloat maskValue) {
    SmallVector<NamedAttribute> attrs =
        attentionAttrs(scale, maskValue, /*seqMajor=*/true);
    attrs.push_back(integer("packed_qkv", 1));
    return attrs;
  }
  NamedAttribute axes(ArrayRef<int64_t> values) { return list("axes", values); }
  NamedAttribute reduction(CollectiveReduction value) {
    return word("op", stringifyCollectiveReduction(value));
  }
  /// Rank lists stay lists until the plan is emitted, where each rank finds
  /// its own group or peer in them.
  NamedAttribute groups(StringRef name, ArrayAttr lists) {
    return builder.getNamedAttr(name, lists);
  }

  Builder builder;
};

struct SelectKernelsPass : impl::LoomSelectKernelsBase<SelectKernelsPass> {
  using LoomSelectKernelsBase::LoomSelectKernelsBase;

  void runOnOperation() override {
    Selector selector(&getContext());
    bool failed = false;
    for (Operation &op : getOperation().getOps()) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      FailureOr<std::optional<Selection>> selection = selector.select(&op);
      if (mlir::failed(selection)) {
        failed = true;
        continue;
      }
      if (!*selection)
        continue;
      Builder builder(&getContext());
      op.setAttr("plan.kernel", builder.getStringAttr((*selection)->kernel));
      op.setAttr("plan.kernel_attrs",
                 builder.getDictionaryAttr((*selection)->attrs));
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
