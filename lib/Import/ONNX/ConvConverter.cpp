//===- ConvConverter.cpp - ONNX Conv as matrix products -------------------===//
//
// Conv over any number of spatial dimensions as one matmul:
//
//  * Patches (a ViT's patch embedding: stride = kernel, no padding, no
//    dilation, one group, sizes divisible): the input is cut into its
//    patches by a reshape and a transpose, [N, O..., C K...], and multiplied
//    by the weight as [M, C K...]. No copy beyond the transpose.
//  * Anything else (padding, strides, dilations, groups): im2col by a
//    gather. The input as [C S..., N] rows plus one zero row, a constant
//    table of the row each (channel, kernel offset, output position) reads
//    (the zero row where it falls into the padding), one gather of the
//    columns, and a matmul per group. The gather's gradient (a scatter_add)
//    sums the overlapping windows back.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <numeric>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {
struct ConvGeometry {
  int64_t batch, channels, features, groups;
  SmallVector<int64_t> input, kernel, strides, dilations, padBegin, padEnd,
      output;
};
} // namespace

/// Reads and checks the attributes against the operand shapes.
static FailureOr<ConvGeometry> readGeometry(NodeContext &ctx) {
  RankedTensorType x = ctx.getInputType(0), w = ctx.getInputType(1);
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return ctx.emitError() << "input " << x << " and weight " << w
                           << " must have the same rank, at least 3";
  int64_t spatial = x.getRank() - 2;
  ConvGeometry g;
  g.batch = x.getDimSize(0);
  g.channels = x.getDimSize(1);
  g.features = w.getDimSize(0);
  g.groups = ctx.getInt("group", 1);
  g.input.assign(x.getShape().begin() + 2, x.getShape().end());
  g.kernel.assign(w.getShape().begin() + 2, w.getShape().end());
  if (g.groups < 1 || g.channels % g.groups != 0 ||
      g.features % g.groups != 0 || w.getDimSize(1) != g.channels / g.groups)
    return ctx.emitError() << "weight " << w << " does not fit input " << x
                           << " in " << g.groups << " group(s)";
  if (std::optional<SmallVector<int64_t>> shape = ctx.getInts("kernel_shape"))
    if (*shape != ArrayRef<int64_t>(g.kernel))
      return ctx.emitError() << "kernel_shape does not match the weight " << w;
  auto listOr = [&](StringRef name, int64_t fallback,
                    SmallVector<int64_t> &out) -> LogicalResult {
    out.assign(spatial, fallback);
    if (std::optional<SmallVector<int64_t>> given = ctx.getInts(name)) {
      if (int64_t(given->size()) != spatial)
        return ctx.emitError()
               << "attribute '" << name << "' has " << given->size()
               << " values for " << spatial << " spatial dimensions";
      out = *given;
    }
    if (llvm::any_of(out, [](int64_t v) { return v < 1; }))
      return ctx.emitError() << "attribute '" << name << "' must be positive";
    return success();
  };
  if (failed(listOr("strides", 1, g.strides)) ||
      failed(listOr("dilations", 1, g.dilations)))
    return failure();
  g.padBegin.assign(spatial, 0);
  g.padEnd.assign(spatial, 0);
  std::string autoPad = ctx.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    if (std::optional<SmallVector<int64_t>> pads = ctx.getInts("pads")) {
      if (int64_t(pads->size()) != 2 * spatial)
        return ctx.emitError() << "attribute 'pads' has " << pads->size()
                               << " values; expected " << 2 * spatial;
      for (int64_t i = 0; i < spatial; ++i) {
        g.padBegin[i] = (*pads)[i];
        g.padEnd[i] = (*pads)[spatial + i];
      }
      if (llvm::any_of(*pads, [](int64_t p) { return p < 0; }))
        return ctx.emitError() << "attribute 'pads' must not be negative";
    }
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t out = (g.input[i] + g.strides[i] - 1) / g.strides[i];
      int64_t extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
      int64_t total =
          std::max<int64_t>((out - 1) * g.strides[i] + extent - g.input[i], 0);
      int64_t small = total / 2, large = total - small;
      g.padBegin[i] = autoPad == "SAME_UPPER" ? small : large;
      g.padEnd[i] = total - g.padBegin[i];
    }
  } else if (autoPad != "VALID") {
    return ctx.emitError() << "attribute 'auto_pad' is '" << autoPad
                           << "'; expected NOTSET, SAME_UPPER, SAME_LOWER or "
                              "VALID";
  }
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
    int64_t padded = g.input[i] + g.padBegin[i] + g.padEnd[i];
    if (padded < extent)
      return ctx.emitError()
             << "spatial dimension " << i << " (" << g.input[i] << " padded to "
             << padded << ") is smaller than the kernel's extent " << extent;
    g.output.push_back((padded - extent) / g.strides[i] + 1);
  }
  return g;
}

/// Whether the convolution cuts the input into disjoint patches.
static bool isPatchify(const ConvGeometry &g) {
  for (size_t i = 0; i < g.kernel.size(); ++i)
    if (g.strides[i] != g.kernel[i] || g.dilations[i] != 1 ||
        g.padBegin[i] != 0 || g.padEnd[i] != 0 || g.input[i] % g.kernel[i] != 0)
      return false;
  return g.groups == 1;
}

/// [N, M, O...] from the patches' product [N, O..., M].
static Value convertPatchify(NodeContext &ctx, OpChain &ops,
                             const ConvGeometry &g) {
  int64_t spatial = g.kernel.size();
  // [N, C, O1, K1, ..., Od, Kd] -> [N, O1..Od, C, K1..Kd].
  SmallVector<int64_t> split = {g.batch, g.channels};
  SmallVector<int64_t> order = {0};
  for (int64_t i = 0; i < spatial; ++i) {
    split.append({g.output[i], g.kernel[i]});
    order.push_back(2 + 2 * i);
  }
  order.push_back(1);
  for (int64_t i = 0; i < spatial; ++i)
    order.push_back(3 + 2 * i);
  int64_t positions = product(g.output);
  int64_t depth = g.channels * product(g.kernel);
  Value patches =
      ops.reshape(ops.transpose(ops.reshape(ctx.getInput(0), split), order),
                  {g.batch * positions, depth});
  Value weight = ops.reshape(ctx.getInput(1), {g.features, depth});
  Value product = ops.make<MatmulOp>(
      {patches, weight},
      {ctx.namedAttr("transpose_rhs", ctx.getBuilder().getUnitAttr())});
  if (ctx.hasInput(2))
    product = ops.make<AddOp>({product, ctx.getInput(2)});
  SmallVector<int64_t> unflat = {g.batch};
  unflat.append(g.output.begin(), g.output.end());
  unflat.push_back(g.features);
  SmallVector<int64_t> toChannelsFirst = {0, spatial + 1};
  for (int64_t i = 0; i < spatial; ++i)
    toChannelsFirst.push_back(1 + i);
  return ops.transpose(ops.reshape(product, unflat), toChannelsFirst);
}

/// im2col by a gather of rows of the input as [C S..., N] plus a zero row.
static Value convertIm2Col(NodeContext &ctx, OpChain &ops,
                           const ConvGeometry &g) {
  int64_t spatial = g.kernel.size();
  int64_t area = product(g.input), window = product(g.kernel),
          positions = product(g.output);
  Type element = ctx.getInputType(0).getElementType();
  // [N, C, S...] -> [C, S..., N] -> [C S, N] ++ a zero row.
  SmallVector<int64_t> toRows;
  for (int64_t dim = 1; dim < spatial + 2; ++dim)
    toRows.push_back(dim);
  toRows.push_back(0);
  Value rows = ops.reshape(ops.transpose(ctx.getInput(0), toRows),
                           {g.channels * area, g.batch});
  Value zeroRow = ops.broadcast(ops.scalar(element, 0), {1, g.batch});
  rows = ops.make<ConcatOp>(
      {rows, zeroRow},
      {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(0))});
  // The row each (channel, kernel offset, output position) reads.
  SmallVector<int64_t> table;
  table.reserve(g.channels * window * positions);
  SmallVector<int64_t> inputStrides(spatial, 1);
  for (int64_t i = spatial - 2; i >= 0; --i)
    inputStrides[i] = inputStrides[i + 1] * g.input[i + 1];
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t k = 0; k < window; ++k)
      for (int64_t o = 0; o < positions; ++o) {
        int64_t offset = c * area, kRest = k, oRest = o;
        bool padding = false;
        for (int64_t i = spatial - 1; i >= 0; --i) {
          int64_t kernelAt = kRest % g.kernel[i], outAt = oRest % g.output[i];
          kRest /= g.kernel[i];
          oRest /= g.output[i];
          int64_t at =
              outAt * g.strides[i] + kernelAt * g.dilations[i] - g.padBegin[i];
          if (at < 0 || at >= g.input[i])
            padding = true;
          offset += at * inputStrides[i];
        }
        table.push_back(padding ? g.channels * area : offset);
      }
  int64_t perGroup = g.channels / g.groups;
  Value columns = ops.reshape(
      ops.make<GatherOp>({rows, ops.indices({int64_t(table.size())}, table)}),
      {g.groups, perGroup * window, positions * g.batch});
  Value weight = ops.reshape(
      ctx.getInput(1), {g.groups, g.features / g.groups, perGroup * window});
  Value product = ops.reshape(ops.make<MatmulOp>({weight, columns}),
                              {g.features, positions, g.batch});
  if (ctx.hasInput(2))
    product = ops.make<AddOp>(
        {product, ops.reshape(ctx.getInput(2), {g.features, 1, 1})});
  SmallVector<int64_t> shape = {g.batch, g.features};
  shape.append(g.output.begin(), g.output.end());
  return ops.reshape(ops.transpose(product, {2, 0, 1}), shape);
}

static LogicalResult convertConv(NodeContext &ctx) {
  FailureOr<ConvGeometry> geometry = readGeometry(ctx);
  if (failed(geometry))
    return failure();
  if (ctx.hasInput(2) &&
      ctx.getInputType(2).getShape() != ArrayRef<int64_t>{geometry->features})
    return ctx.emitError() << "bias " << ctx.getInputType(2)
                           << " must have one value per output channel ("
                           << geometry->features << ")";
  OpChain ops(ctx);
  Value result = isPatchify(*geometry) ? convertPatchify(ctx, ops, *geometry)
                                       : convertIm2Col(ctx, ops, *geometry);
  return ops.setOutput(0, result);
}

void onnx_import::registerConvConverter(ConverterRegistry &registry) {
  registry.add("Conv", {11}, convertConv);
}
