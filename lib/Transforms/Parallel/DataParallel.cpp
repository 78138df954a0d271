//===- DataParallel.cpp - The batch split over a mesh axis ----------------===//
//
// Data parallelism as a sharding: each argument (a batch of the step's
// data) is pinned split on its batch dimension, and propagation and
// partitioning derive the rest (replicated parameters, gradients summed
// over the axis, each rank's share of the mean loss).
//
//===----------------------------------------------------------------------===//

#include "FactorSharding.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDATAPARALLEL
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// With gradient accumulation an argument stacks the microbatches along
/// its batch dimension, and the step slices microbatch k as rows
/// [k m, (k + 1) m). Split over `ways` ranks, each rank would hold whole
/// microbatches of the global batch, not its part of each. Rows of the
/// batch are interchangeable (the step averages equal microbatches, so any
/// grouping of the rows into microbatches gives the same loss and
/// gradients), so microbatch k is taken instead as the k-th block of m /
/// ways rows of each rank's B / ways: the argument seen as [ways,
/// microbatches, m / ways, ...], sliced at k on the middle dimension. Each
/// rank then reads its own contiguous rows, and every microbatch is split
/// over the ranks. Returns the number of microbatches so taken (0: none).
int64_t interleaveMicrobatches(BlockArgument argument, int64_t ways) {
  int64_t interleaved = 0;
  auto type = cast<RankedTensorType>(argument.getType());
  int64_t batch = type.getDimSize(0);
  for (Operation *user : llvm::to_vector(argument.getUsers())) {
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      continue;
    auto result = cast<RankedTensorType>(slice.getType());
    int64_t rows = result.getDimSize(0);
    int64_t start = slice.getStarts()[0];
    bool rowsOnly = llvm::all_of(slice.getStrides(),
                                 [](int64_t stride) { return stride == 1; });
    for (int64_t dim = 1; dim < type.getRank(); ++dim)
      rowsOnly &= result.getDimSize(dim) == type.getDimSize(dim);
    if (!rowsOnly || rows == batch || batch % rows != 0 || start % rows != 0 ||
        rows % ways != 0)
      continue;
    int64_t microbatches = batch / rows;
    OpBuilder builder(slice);
    Location loc = slice.getLoc();
    SmallVector<int64_t> blocks = {ways, microbatches, rows / ways};
    blocks.append(type.getShape().begin() + 1, type.getShape().end());
    Value viewed = builder.create<ReshapeOp>(
        loc, RankedTensorType::get(blocks, type.getElementType()), argument);
    SmallVector<int64_t> starts(blocks.size(), 0), limits(blocks),
        strides(blocks.size(), 1);
    starts[1] = start / rows;
    limits[1] = starts[1] + 1;
    Value picked =
        builder.create<SliceOp>(loc, viewed, starts, limits, strides);
    Value microbatch = builder.create<ReshapeOp>(loc, result, picked);
    slice.getResult().replaceAllUsesWith(microbatch);
    slice.erase();
    interleaved = microbatches;
  }
  return interleaved;
}

/// Dropout masks follow the rows (loom.dropout): microbatch k numbered its
/// elements after the earlier microbatches' (`index_base` = k times its
/// size), which are now, per rank, chunks of the batch `ways` apart. Each
/// chunk keeps the numbers its rows have in the batch. (As `index_base`,
/// this holds for tensors whose leading dimension is the batch's.)
void renumberDropouts(func::FuncOp func, int64_t ways, int64_t microbatches) {
  func.walk([&](DropoutOp dropout) {
    int64_t elements =
        cast<RankedTensorType>(dropout.getInput().getType()).getNumElements();
    int64_t base = dropout.getIndexBaseAttr().getInt();
    if (dropout.getOffsets() || dropout.getIndexChunk() != 0 || elements == 0 ||
        elements % ways != 0 || base % elements != 0 ||
        base / elements >= microbatches)
      return;
    int64_t chunk = elements / ways;
    dropout.setIndexChunk(chunk);
    dropout.setIndexChunkStride(chunk * microbatches);
    dropout.setIndexBase(base / elements * chunk);
  });
}

struct DataParallelPass : impl::LoomDataParallelBase<DataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MeshOp> meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError("loom-data-parallel needs one loom.mesh (it has ")
          << meshes.size() << ")";
      return signalPassFailure();
    }
    MeshAttr mesh = meshes.front().getMesh();
    // The batch is split over each named axis, major first.
    SmallVector<StringRef> names;
    StringRef(axis).split(names, ',');
    AxisList axes;
    int64_t size = 1;
    for (StringRef name : names) {
      name = name.trim();
      if (!mesh.getAxisIndex(name)) {
        meshes.front().emitOpError("has no axis '")
            << name << "' to split the batch over";
        return signalPassFailure();
      }
      axes.push_back(StringAttr::get(module.getContext(), name));
      size *= mesh.getAxisSize(name);
    }
    auto meshName = FlatSymbolRefAttr::get(meshes.front().getSymNameAttr());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      OpBuilder builder(func.getContext());
      int64_t microbatches = 0;
      Operation *lastPin = nullptr;
      for (BlockArgument argument : func.getArguments()) {
        auto type = dyn_cast<RankedTensorType>(argument.getType());
        if (!type || type.getRank() == 0)
          continue;
        if (type.getDimSize(0) % size != 0) {
          auto name = func.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                        "onnx.name");
          func.emitOpError("has a batch of ")
              << type.getDimSize(0) << " in argument #"
              << argument.getArgNumber()
              << (name ? " ('" + name.str() + "')" : std::string())
              << ", which " << axis << " (" << size << " ranks)"
              << " does not divide; data parallelism splits the global "
                 "batch evenly";
          return signalPassFailure();
        }
        microbatches =
            std::max(microbatches, interleaveMicrobatches(argument, size));
        DimAxes dims(type.getRank());
        dims[0] = axes;
        // After the pins made so far (interleaving may have erased the
        // block's first op).
        if (lastPin)
          builder.setInsertionPointAfter(lastPin);
        else
          builder.setInsertionPointToStart(&func.getBody().front());
        auto pin = builder.create<ShardOp>(
            argument.getLoc(), argument,
            makeSharding(module.getContext(), meshName, dims),
            /*priority=*/IntegerAttr());
        argument.replaceAllUsesExcept(pin, pin);
        lastPin = pin;
      }
      if (microbatches > 1)
        renumberDropouts(func, size, microbatches);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
