//===- NarrowBiasGradients.cpp - Bias gradients from the bf16 gradient ----===//
//
// Under mixed precision a linear layer's backward GEMMs read its output
// gradient rounded to bf16, while the bias gradient, a sum of the same
// gradient over every row, read the f32 value. That f32 tensor then had to
// be written for the sum alone: for GPT-2's MLP, an [8, 1024, 3072] f32
// copy of the GELU gradient (100 MB) written and read back per layer, next
// to the bf16 one the GEMMs read. Summing the bf16 copy (in f32, as
// reduce_sum does for a bf16 input) is what torch.autocast computes, and
// it halves the sum's reads and removes the f32 copy.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMNARROWBIASGRADIENTS
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// Whether `sum` reduces every dimension of its input but the last: the
/// shape of a bias gradient.
bool sumsAllButLast(ReduceSumOp sum) {
  int64_t rank = cast<RankedTensorType>(sum.getInput().getType()).getRank();
  return rank >= 2 &&
         llvm::equal(sum.getAxes(), llvm::seq<int64_t>(0, rank - 1));
}

/// A cast of `value` (f32) to a narrower float type in the same block as
/// `sum`: the copy a bf16 GEMM reads.
CastOp narrowCopyOf(Value value, ReduceSumOp sum) {
  auto wide = cast<FloatType>(getElementTypeOrSelf(value.getType()));
  for (Operation *user : value.getUsers()) {
    auto copy = dyn_cast<CastOp>(user);
    if (!copy || copy->getBlock() != sum->getBlock())
      continue;
    auto narrow = dyn_cast<FloatType>(copy.getType().getElementType());
    if (narrow && narrow.getWidth() < wide.getWidth())
      return copy;
  }
  return {};
}

struct NarrowBiasGradientsPass
    : impl::LoomNarrowBiasGradientsBase<NarrowBiasGradientsPass> {
  void runOnOperation() override {
    getOperation().walk([](ReduceSumOp sum) {
      Value input = sum.getInput();
      if (!getElementTypeOrSelf(input.getType()).isF32() ||
          !sumsAllButLast(sum))
        return;
      CastOp copy = narrowCopyOf(input, sum);
      if (!copy)
        return;
      // The cast reads only `input`, which is defined before the sum.
      if (!copy->isBeforeInBlock(sum))
        copy->moveBefore(sum);
      sum.getInputMutable().assign(copy.getResult());
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
