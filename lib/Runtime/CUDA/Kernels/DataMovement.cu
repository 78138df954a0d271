//===- DataMovement.cu - CUDA gather, transpose, slice, concat, ... -------===//
//
// Kernels that move elements without arithmetic, plus dropout. Moves work
// on raw bytes, so they take any dtype: each copies elements of the widest
// unsigned type (1 to 16 bytes) that the row lengths, strides and the
// launch's pointers are all aligned to, which is only known at launch
// (operands are arena offsets).
//
// Out-of-range indices of gather are recorded in the DeviceError (the first
// one of the step wins) and read as zeros. scatter_add is ScatterAdd.cu's.
//
// dropout draws its mask with the CPU's functions (DropoutMask.h), so its
// masks are bit-identical to the CPU's.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"
#include "DropoutMask.h"

#include <cstring>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Element widths
//===----------------------------------------------------------------------===//

/// Calls f(U{}) with U an unsigned type of `width` bytes (1, 2, 4, 8, 16).
template <typename F> Status withWidth(int64_t width, F &&f) {
  switch (width) {
  case 1:
    return f(uint8_t());
  case 2:
    return f(uint16_t());
  case 4:
    return f(uint32_t());
  case 8:
    return f(uint2());
  default:
    return f(uint4());
  }
}

/// The widest of 16, 8, ..., `least` bytes dividing every value.
int64_t widestDividing(std::initializer_list<uint64_t> values, int64_t least) {
  for (int64_t width = 16; width > least; width /= 2) {
    bool ok = true;
    for (uint64_t value : values)
      ok = ok && value % uint64_t(width) == 0;
    if (ok)
      return width;
  }
  return least;
}

uint64_t address(const void *p) {
  return uint64_t(reinterpret_cast<uintptr_t>(p));
}

/// True when indices and offsets up to `extent` need 64 bits.
bool wide(int64_t extent) { return needsWide(extent); }

//===----------------------------------------------------------------------===//
// 2-D copies (concat, split) and strided copies (transpose, slice)
//===----------------------------------------------------------------------===//

template <typename U, typename I>
__global__ void copy2D(U *dst, int64_t dstPitch, const U *src, int64_t srcPitch,
                       I rows, I cols) {
  const I total = rows * cols;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += I(gridDim.x) * blockDim.x) {
    I r = i / cols, c = i % cols;
    dst[r * dstPitch + c] = src[r * srcPitch + c];
  }
}

/// Copies `rows` rows of `rowBytes` bytes, `srcPitch` bytes apart in `src`
/// and `dstPitch` apart in `dst`.
Status launchCopy2D(cudaStream_t stream, void *dst, int64_t dstPitch,
                    const void *src, int64_t srcPitch, int64_t rows,
                    int64_t rowBytes) {
  if (rows == 0 || rowBytes == 0 || dst == src)
    return Status::ok();
  if (rows == 1 || (dstPitch == rowBytes && srcPitch == rowBytes))
    return cudaStatus(cudaMemcpyAsync(dst, src, uint64_t(rows * rowBytes),
                                      cudaMemcpyDeviceToDevice, stream),
                      "copy");
  int64_t width =
      widestDividing({uint64_t(rowBytes), uint64_t(dstPitch),
                      uint64_t(srcPitch), address(dst), address(src)},
                     1);
  return withWidth(width, [&](auto tag) {
    using U = decltype(tag);
    const int64_t cols = rowBytes / width;
    const unsigned grid = gridFor(rows * cols);
    if (wide(rows * std::max(dstPitch, srcPitch) / width))
      launchKernel(copy2D<U, int64_t>, grid, kThreads, 0, stream,
                   static_cast<U *>(dst), dstPitch / width,
                   static_cast<const U *>(src), srcPitch / width, rows, cols);
    else
      launchKernel(copy2D<U, int32_t>, grid, kThreads, 0, stream,
                   static_cast<U *>(dst), dstPitch / width,
                   static_cast<const U *>(src), srcPitch / width, int32_t(rows),
                   int32_t(cols));
    return launchStatus("copy");
  });
}

/// y[i] = x[base + offset of i along dims.stride], i over dims.size.
template <typename U, typename I>
__global__ void stridedCopy(const U *x, U *y, I total, Dims dims, I base) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += I(gridDim.x) * blockDim.x)
    y[i] = x[base + stridedOffset(dims, i)];
}

/// Launches stridedCopy on elements of `size` bytes, widened when the
/// innermost dim is contiguous and everything is aligned to a wider type.
Status launchStrided(cudaStream_t stream, const void *x, void *y, Dims dims,
                     int64_t base, int64_t size) {
  int64_t total = 1;
  for (int d = 0; d < dims.rank; ++d)
    total *= dims.size[d];
  if (total == 0)
    return Status::ok();
  int64_t width = size;
  if (dims.rank > 0 && dims.stride[dims.rank - 1] == 1) {
    const int last = dims.rank - 1;
    std::vector<uint64_t> values = {uint64_t(dims.size[last] * size),
                                    uint64_t(base * size), address(x),
                                    address(y)};
    width = 16;
    for (; width > size; width /= 2) {
      bool ok = true;
      for (uint64_t v : values)
        ok = ok && v % uint64_t(width) == 0;
      for (int d = 0; d < last; ++d)
        ok = ok && (uint64_t(std::llabs(dims.stride[d])) * uint64_t(size)) %
                           uint64_t(width) ==
                       0;
      if (ok)
        break;
    }
    if (width > size) {
      const int64_t factor = width / size;
      dims.size[last] /= factor;
      for (int d = 0; d < last; ++d)
        dims.stride[d] /= factor;
      base /= factor;
      total /= factor;
    }
  }
  int64_t extent = std::llabs(base) + 1;
  for (int d = 0; d < dims.rank; ++d)
    extent += (dims.size[d] - 1) * std::llabs(dims.stride[d]);
  return withWidth(width, [&](auto tag) {
    using U = decltype(tag);
    const unsigned grid = gridFor(total);
    if (wide(std::max(total, extent)))
      launchKernel(stridedCopy<U, int64_t>, grid, kThreads, 0, stream,
                   static_cast<const U *>(x), static_cast<U *>(y), total, dims,
                   base);
    else
      launchKernel(stridedCopy<U, int32_t>, grid, kThreads, 0, stream,
                   static_cast<const U *>(x), static_cast<U *>(y),
                   int32_t(total), dims, int32_t(base));
    return launchStatus("strided copy");
  });
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

constexpr int kTile = 32, kTileRows = 8;

/// The proper transpose: dim p of the (merged) output is contiguous in the
/// input, the innermost output dim is not. 32x32 tiles go through shared
/// memory so that both reads (along p) and writes (along the last dim)
/// coalesce.
template <typename U>
__global__ void transposeTiled(const U *x, U *y, Dims otherIn, Dims otherOut,
                               int64_t outer, int64_t rowsP, int64_t cols,
                               int64_t inCol, int64_t outRowP, int64_t tilesP,
                               int64_t tilesC) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t items = outer * tilesP * tilesC;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t o = item / (tilesP * tilesC), t = item % (tilesP * tilesC);
    const int64_t p0 = (t / tilesC) * kTile, c0 = (t % tilesC) * kTile;
    const int64_t inBase = stridedOffset(otherIn, o);
    const int64_t outBase = stridedOffset(otherOut, o);
    for (int cc = threadIdx.y; cc < kTile; cc += kTileRows) {
      int64_t r = p0 + threadIdx.x, c = c0 + cc;
      if (r < rowsP && c < cols)
        tile[cc][threadIdx.x] = x[inBase + r + c * inCol];
    }
    __syncthreads();
    for (int rr = threadIdx.y; rr < kTile; rr += kTileRows) {
      int64_t r = p0 + rr, c = c0 + threadIdx.x;
      if (r < rowsP && c < cols)
        y[outBase + r * outRowP + c] = tile[threadIdx.x][rr];
    }
    __syncthreads(); // the tile is reused by the next item
  }
}

struct TransposePlan {
  enum class Shape { Nothing, Copy, Strided, Tiled } shape = Shape::Nothing;
  int64_t size = 0;   // element bytes
  uint64_t bytes = 0; // Copy
  Dims dims;          // Strided: output dims with input strides
  // Tiled:
  Dims otherIn, otherOut;
  int64_t outer = 1, rowsP = 0, cols = 0, inCol = 0, outRowP = 0;
};

Status planTranspose(const Instruction &inst, TransposePlan &plan) {
  const TensorRef &x = inst.inputs[0];
  plan.size = int64_t(dtypeSize(x.dtype));
  if (x.elements() == 0)
    return Status::ok();
  // Output dims, size-1 dims dropped and dims that stay adjacent merged,
  // with their input strides (as the CPU kernel does).
  std::vector<int64_t> inStrides(x.shape.size(), 1);
  for (size_t d = x.shape.size(); d-- > 1;)
    inStrides[d - 1] = inStrides[d] * x.shape[d];
  std::vector<int64_t> shape, strides;
  for (int64_t p : intListAttr(inst.attrs, "permutation")) {
    int64_t size = x.shape[size_t(p)], stride = inStrides[size_t(p)];
    if (size == 1)
      continue;
    if (!shape.empty() && strides.back() == stride * size) {
      shape.back() *= size;
      strides.back() = stride;
      continue;
    }
    shape.push_back(size);
    strides.push_back(stride);
  }
  if (shape.size() <= 1) {
    plan.shape = TransposePlan::Shape::Copy;
    plan.bytes = x.bytes();
    return Status::ok();
  }
  if (Status s = expectDimsAtMost(shape.size(), "a transpose"); !s)
    return s;
  const size_t last = shape.size() - 1;
  if (strides[last] == 1) {
    plan.shape = TransposePlan::Shape::Strided;
    plan.dims.rank = int(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      plan.dims.size[d] = shape[d];
      plan.dims.stride[d] = strides[d];
    }
    return Status::ok();
  }
  plan.shape = TransposePlan::Shape::Tiled;
  size_t p = 0;
  while (strides[p] != 1)
    ++p;
  std::vector<int64_t> outStrides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    outStrides[d - 1] = outStrides[d] * shape[d];
  for (size_t d = 0; d < last; ++d) {
    if (d == p)
      continue;
    int r = plan.otherIn.rank++;
    plan.otherOut.rank++;
    plan.otherIn.size[r] = plan.otherOut.size[r] = shape[d];
    plan.otherIn.stride[r] = strides[d];
    plan.otherOut.stride[r] = outStrides[d];
    plan.outer *= shape[d];
  }
  plan.rowsP = shape[p];
  plan.cols = shape[last];
  plan.inCol = strides[last];
  plan.outRowP = outStrides[p];
  return Status::ok();
}

Status launchTranspose(const TransposePlan &plan, cudaStream_t stream,
                       const void *x, void *y) {
  switch (plan.shape) {
  case TransposePlan::Shape::Nothing:
    return Status::ok();
  case TransposePlan::Shape::Copy:
    if (x == y)
      return Status::ok();
    return cudaStatus(
        cudaMemcpyAsync(y, x, plan.bytes, cudaMemcpyDeviceToDevice, stream),
        "transpose copy");
  case TransposePlan::Shape::Strided:
    return launchStrided(stream, x, y, plan.dims, 0, plan.size);
  case TransposePlan::Shape::Tiled:
    break;
  }
  const int64_t tilesP = (plan.rowsP + kTile - 1) / kTile;
  const int64_t tilesC = (plan.cols + kTile - 1) / kTile;
  const int64_t items = plan.outer * tilesP * tilesC;
  const unsigned grid = unsigned(std::min<int64_t>(items, 1 << 20));
  return withWidth(plan.size, [&](auto tag) {
    using U = decltype(tag);
    launchKernel(transposeTiled<U>, grid, dim3(kTile, kTileRows), 0, stream,
                 static_cast<const U *>(x), static_cast<U *>(y), plan.otherIn,
                 plan.otherOut, plan.outer, plan.rowsP, plan.cols, plan.inCol,
                 plan.outRowP, tilesP, tilesC);
    return launchStatus("transpose");
  });
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

/// y[o, j, e] = x[o, indices[j], e], in units of U (e < inner).
template <typename U, typename Idx, typename I>
__global__ void gatherKernel(const U *x, const Idx *indices, U *y, I outer,
                             I count, I n, I inner, DeviceError *error,
                             int32_t instruction) {
  const I total = outer * count * inner;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += I(gridDim.x) * blockDim.x) {
    const I e = i % inner, t = i / inner, j = t % count, o = t / count;
    const int64_t raw = int64_t(indices[j]);
    const int64_t index = raw < 0 ? raw + int64_t(n) : raw;
    if (index < 0 || index >= int64_t(n)) {
      recordError(error, DeviceError::IndexOutOfRange, instruction, raw,
                  int64_t(j), int64_t(n));
      y[i] = U();
      continue;
    }
    y[i] = x[(o * n + I(index)) * inner + e];
  }
}

struct GatherPlan {
  int64_t outer = 1, count = 0, n = 0, innerBytes = 0;
  bool i32 = false;
};

Status launchGather(const GatherPlan &p, const LaunchContext &context,
                    const void *x, const void *indices, void *y) {
  if (p.outer * p.count * p.innerBytes == 0)
    return Status::ok();
  const int64_t width =
      widestDividing({uint64_t(p.innerBytes), address(x), address(y)}, 1);
  const int64_t inner = p.innerBytes / width;
  const bool isWide = wide(p.outer * std::max(p.count, p.n) * inner);
  return withWidth(width, [&](auto tag) {
    using U = decltype(tag);
    auto go = [&](auto indexTag, auto iTag) {
      using Idx = decltype(indexTag);
      using I = decltype(iTag);
      launchKernel(gatherKernel<U, Idx, I>, gridFor(p.outer * p.count * inner),
                   kThreads, 0, context.stream, static_cast<const U *>(x),
                   static_cast<const Idx *>(indices), static_cast<U *>(y),
                   I(p.outer), I(p.count), I(p.n), I(inner), context.error,
                   context.instruction);
    };
    if (p.i32)
      isWide ? go(int32_t(), int64_t()) : go(int32_t(), int32_t());
    else
      isWide ? go(int64_t(), int64_t()) : go(int64_t(), int32_t());
    return launchStatus("gather");
  });
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

/// `step` and `offsets` are device pointers (null when the plan has
/// none): the step is the training step the executor's plan computed.
template <typename T>
__global__ void
dropoutKernel(const T *x, T *y, uint8_t *mask, int64_t n, int64_t seed,
              const double *step, const int64_t *offsets,
              loomrt::DropoutBlock block, double threshold, T scale) {
  const uint64_t stream = loomrt::dropoutStream(seed, step ? *step : 0.0);
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const bool keep = loomrt::dropoutKeeps(
        stream, loomrt::dropoutIndex(block, offsets, k), threshold);
    mask[k] = keep;
    y[k] = keep ? x[k] * scale : T(0);
  }
}

/// concat and split: the whole is outer x (pieces along axis) x inner.
struct PiecesPlan {
  int64_t outer = 1, wholeRowBytes = 0;
  std::vector<int64_t> pieceRowBytes;
};

PiecesPlan planPieces(const std::vector<TensorRef> &pieces,
                      const TensorRef &whole, int64_t axis) {
  PiecesPlan plan;
  const int64_t size = int64_t(dtypeSize(whole.dtype));
  const int64_t innerBytes =
      product(whole.shape, size_t(axis) + 1, whole.shape.size()) * size;
  plan.outer = product(whole.shape, 0, size_t(axis));
  plan.wholeRowBytes = whole.shape[size_t(axis)] * innerBytes;
  for (const TensorRef &piece : pieces)
    plan.pieceRowBytes.push_back(piece.shape[size_t(axis)] * innerBytes);
  return plan;
}

} // namespace

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

KernelOr cuda::createGather(const LaunchContext &, const Instruction &inst) {
  const TensorRef &x = inst.inputs[0];
  const size_t axis =
      size_t(resolveAxis(intAttr(inst.attrs, "axis", 0), x.shape.size()));
  GatherPlan p;
  p.outer = product(x.shape, 0, axis);
  p.n = x.shape[axis];
  p.innerBytes =
      product(x.shape, axis + 1, x.shape.size()) * int64_t(dtypeSize(x.dtype));
  p.count = inst.inputs[1].elements();
  p.i32 = inst.inputs[1].dtype == DType::I32;
  return makeKernel([p](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    return launchGather(p, context, inputs[0], inputs[1], outputs[0]);
  });
}

KernelOr cuda::createTranspose(const LaunchContext &, const Instruction &inst) {
  TransposePlan plan;
  if (Status s = planTranspose(inst, plan); !s)
    return s;
  return makeKernel([plan](const LaunchContext &context,
                           const void *const *inputs, void *const *outputs) {
    return launchTranspose(plan, context.stream, inputs[0], outputs[0]);
  });
}

KernelOr cuda::createSlice(const LaunchContext &, const Instruction &inst) {
  const TensorRef &x = inst.inputs[0], &y = inst.outputs[0];
  if (Status s = expectDimsAtMost(x.shape.size(), "a slice"); !s)
    return s;
  const std::vector<int64_t> starts = intListAttr(inst.attrs, "starts");
  const std::vector<int64_t> steps = intListAttr(inst.attrs, "strides");
  std::vector<int64_t> xStrides(x.shape.size(), 1);
  for (size_t d = x.shape.size(); d-- > 1;)
    xStrides[d - 1] = xStrides[d] * x.shape[d];
  Dims dims;
  int64_t base = 0;
  dims.rank = int(y.shape.size());
  for (size_t d = 0; d < y.shape.size(); ++d) {
    dims.size[d] = y.shape[d];
    dims.stride[d] = steps[d] * xStrides[d];
    base += starts[d] * xStrides[d];
  }
  const int64_t size = int64_t(dtypeSize(x.dtype));
  return makeKernel([=](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    return launchStrided(context.stream, inputs[0], outputs[0], dims, base,
                         size);
  });
}

KernelOr cuda::createConcat(const LaunchContext &, const Instruction &inst) {
  const TensorRef &whole = inst.outputs[0];
  const int64_t axis =
      resolveAxis(intAttr(inst.attrs, "axis"), whole.shape.size());
  PiecesPlan plan = planPieces(inst.inputs, whole, axis);
  return makeKernel([plan](const LaunchContext &context,
                           const void *const *inputs, void *const *outputs) {
    int64_t offset = 0;
    for (size_t i = 0; i < plan.pieceRowBytes.size(); ++i) {
      if (Status s = launchCopy2D(
              context.stream, static_cast<uint8_t *>(outputs[0]) + offset,
              plan.wholeRowBytes, inputs[i], plan.pieceRowBytes[i], plan.outer,
              plan.pieceRowBytes[i]);
          !s)
        return s;
      offset += plan.pieceRowBytes[i];
    }
    return Status::ok();
  });
}

KernelOr cuda::createSplit(const LaunchContext &, const Instruction &inst) {
  const TensorRef &whole = inst.inputs[0];
  const int64_t axis =
      resolveAxis(intAttr(inst.attrs, "axis"), whole.shape.size());
  PiecesPlan plan = planPieces(inst.outputs, whole, axis);
  return makeKernel([plan](const LaunchContext &context,
                           const void *const *inputs, void *const *outputs) {
    int64_t offset = 0;
    for (size_t i = 0; i < plan.pieceRowBytes.size(); ++i) {
      if (Status s = launchCopy2D(
              context.stream, outputs[i], plan.pieceRowBytes[i],
              static_cast<const uint8_t *>(inputs[0]) + offset,
              plan.wholeRowBytes, plan.outer, plan.pieceRowBytes[i]);
          !s)
        return s;
      offset += plan.pieceRowBytes[i];
    }
    return Status::ok();
  });
}

KernelOr cuda::createCopy(const LaunchContext &, const Instruction &inst) {
  const uint64_t bytes = inst.inputs[0].bytes();
  return makeKernel([bytes](const LaunchContext &context,
                            const void *const *inputs, void *const *outputs) {
    if (bytes == 0 || inputs[0] == outputs[0])
      return Status::ok();
    return cudaStatus(cudaMemcpyAsync(outputs[0], inputs[0], bytes,
                                      cudaMemcpyDeviceToDevice, context.stream),
                      "copy");
  });
}

KernelOr cuda::createDropout(const LaunchContext &, const Instruction &inst) {
  const double ratio = doubleAttr(inst.attrs, "ratio");
  const int64_t seed = intAttr(inst.attrs, "seed");
  const int64_t n = inst.inputs[0].elements();
  const double threshold = ratio * double(1 << 24);
  // Inputs: X, the step if present, the offsets if global_shape is given
  // (the CPU check validated the combination).
  const bool hasOffsets = inst.attrs.count("global_shape") != 0;
  const int offsetsInput = hasOffsets ? int(inst.inputs.size()) - 1 : -1;
  const int stepInput =
      int(inst.inputs.size()) - 1 - int(hasOffsets) == 1 ? 1 : -1;
  loomrt::DropoutBlock block;
  block.base = intAttr(inst.attrs, "index_base");
  if (hasOffsets) {
    const std::vector<int64_t> global = intListAttr(inst.attrs, "global_shape");
    block = loomrt::makeDropoutBlock(inst.inputs[0].shape.data(), global.data(),
                                     int(global.size()), block.base);
  }
  block.chunk = intAttr(inst.attrs, "index_chunk");
  block.chunkStride = intAttr(inst.attrs, "index_chunk_stride");
  auto make = [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1 / (1 - ratio));
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      if (n == 0)
        return Status::ok();
      launchKernel(
          dropoutKernel<T>, gridFor(n), kThreads, 0, context.stream,
          static_cast<const T *>(inputs[0]), static_cast<T *>(outputs[0]),
          static_cast<uint8_t *>(outputs[1]), n, seed,
          stepInput < 0 ? nullptr
                        : static_cast<const double *>(inputs[stepInput]),
          offsetsInput < 0 ? nullptr
                           : static_cast<const int64_t *>(inputs[offsetsInput]),
          block, threshold, scale);
      return launchStatus("dropout");
    });
  };
  if (inst.inputs[0].dtype == DType::F32)
    return make(float());
  if (inst.inputs[0].dtype == DType::F64)
    return make(double());
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(inst.inputs[0].dtype) + " dropout");
}
