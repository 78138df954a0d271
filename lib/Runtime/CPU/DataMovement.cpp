//===- DataMovement.cpp - CPU gather, transpose, slice, concat, ... -------===//
//
// Kernels that move elements without arithmetic (plus dropout, which masks
// them). They work on raw bytes, so they take any dtype; the inner loops are
// memcpy of contiguous runs or fixed-width element copies.
//
//===----------------------------------------------------------------------===//

#include "../DropoutMask.h"
#include "CPUKernels.h"
#include <cstdint>

#include <cstring>
#include <numeric>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

/// Bytes per thread below which copies stay on one thread.
constexpr int64_t kCopyGrain = 1 << 18;

/// memcpy of a large buffer split over the threads.
void parallelCopy(void *dst, const void *src, int64_t bytes) {
  if (dst == src || bytes == 0)
    return;
  int threads = threadsFor(bytes, kCopyGrain);
  if (threads == 1) {
    std::memmove(dst, src, size_t(bytes));
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t begin = bytes * t / n, end = bytes * (t + 1) / n;
    std::memcpy(static_cast<uint8_t *>(dst) + begin,
                static_cast<const uint8_t *>(src) + begin, size_t(end - begin));
  }
}

/// Calls f(U{}) with U an unsigned integer of `size` bytes.
template <typename F> inline void withWidth(size_t size, F &&f) {
  switch (size) {
  case 1:
    return f(uint8_t());
  case 2:
    return f(uint16_t());
  case 4:
    return f(uint32_t());
  default:
    return f(uint64_t());
  }
}

/// Copies `count` elements `stride` elements apart from `src` to contiguous
/// `dst`.
void stridedCopy(const uint8_t *src, int64_t stride, int64_t count, size_t size,
                 uint8_t *dst) {
  if (stride == 1) {
    std::memcpy(dst, src, size_t(count) * size);
    return;
  }
  withWidth(size, [&](auto tag) {
    using U = decltype(tag);
    const U *in = reinterpret_cast<const U *>(src);
    U *out = reinterpret_cast<U *>(dst);
    for (int64_t i = 0; i < count; ++i)
      out[i] = in[i * stride];
  });
}

/// Offset (in elements) of the row with linear index `row` of an odometer
/// over `shape` (all dims but the innermost) with `strides`.
int64_t rowOffset(int64_t row, const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &strides) {
  int64_t offset = 0;
  for (size_t d = shape.size() - 1; d-- > 0;) {
    offset += (row % shape[d]) * strides[d];
    row /= shape[d];
  }
  return offset;
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

Status readGather(const Instruction &instruction, int64_t &axis) {
  if (Status s = expectOperandCounts(instruction, 2, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {"axis"}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &indices = instruction.inputs[1],
                  &y = instruction.outputs[0];
  if (Status s = expectSameDType(x, "data", y, "result"); !s)
    return s;
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return Status::error(std::string("indices have dtype ") +
                         dtypeName(indices.dtype) + "; expected i32 or i64");
  if (x.shape.empty())
    return Status::error("data must have rank >= 1");
  int64_t raw;
  if (Status s = getIntAttr(instruction.attrs, "axis", raw, false, 0); !s)
    return s;
  if (Status s = normalizeAxis(raw, int64_t(x.shape.size()), axis); !s)
    return s;
  std::vector<int64_t> expected(x.shape.begin(), x.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (y.shape != expected)
    return Status::error("result " + shapeString(y.shape) + " should be " +
                         shapeString(expected) + " for data " +
                         shapeString(x.shape) + ", indices " +
                         shapeString(indices.shape) + " and axis " +
                         std::to_string(axis));
  return Status::ok();
}

template <typename I> void gatherTyped(const KernelArgs &args, int64_t axis) {
  const Instruction &instruction = args.instruction;
  const std::vector<int64_t> &shape = instruction.inputs[0].shape;
  const size_t size = dtypeSize(instruction.inputs[0].dtype);
  const int64_t outer = dimProduct(shape, 0, size_t(axis));
  const int64_t n = shape[size_t(axis)];
  const int64_t innerBytes =
      dimProduct(shape, size_t(axis) + 1, shape.size()) * int64_t(size);
  const int64_t count = instruction.inputs[1].elements();
  const uint8_t *x = static_cast<const uint8_t *>(args.inputs[0]);
  const I *indices = static_cast<const I *>(args.inputs[1]);
  uint8_t *y = static_cast<uint8_t *>(args.outputs[0]);
  int threads = threadsFor(outer * count * innerBytes, 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < outer * count; ++item) {
    int64_t o = item / count, j = item % count;
    int64_t index = int64_t(indices[j]);
    if (index < 0)
      index += n;
    uint8_t *dst = y + item * innerBytes;
    if (index < 0 || index >= n) {
      reportError(args, "index " + std::to_string(int64_t(indices[j])) +
                            " at position " + std::to_string(j) +
                            " is outside [-" + std::to_string(n) + ", " +
                            std::to_string(n) + ")");
      std::memset(dst, 0, size_t(innerBytes));
      continue;
    }
    std::memcpy(dst, x + (o * n + index) * innerBytes, size_t(innerBytes));
  }
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

Status readTranspose(const Instruction &instruction,
                     std::vector<int64_t> &permutation) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {"permutation"}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (Status s =
          getIntListAttr(instruction.attrs, "permutation", permutation, true);
      !s)
    return s;
  size_t rank = x.shape.size();
  std::vector<bool> seen(rank, false);
  bool valid = permutation.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    int64_t p = permutation[i];
    valid = p >= 0 && p < int64_t(rank) && !seen[size_t(p)];
    if (valid)
      seen[size_t(p)] = true;
  }
  if (!valid)
    return Status::error("permutation " + shapeString(permutation) +
                         " is not a permutation of the " +
                         std::to_string(rank) + " dims of input " +
                         shapeString(x.shape));
  std::vector<int64_t> expected(rank);
  for (size_t i = 0; i < rank; ++i)
    expected[i] = x.shape[size_t(permutation[i])];
  if (y.shape != expected)
    return Status::error("result " + shapeString(y.shape) + " should be " +
                         shapeString(expected) + " for input " +
                         shapeString(x.shape) + " and permutation " +
                         shapeString(permutation));
  return Status::ok();
}

/// Output dims (size-1 dims dropped, dims that stay adjacent merged) with the
/// input stride of each.
struct TransposeSpace {
  std::vector<int64_t> shape, inStrides;
};

TransposeSpace buildTransposeSpace(const std::vector<int64_t> &inShape,
                                   const std::vector<int64_t> &permutation) {
  std::vector<int64_t> strides = contiguousStrides(inShape);
  TransposeSpace space;
  for (int64_t p : permutation) {
    int64_t size = inShape[size_t(p)], stride = strides[size_t(p)];
    if (size == 1)
      continue;
    if (!space.shape.empty() && space.inStrides.back() == stride * size) {
      space.shape.back() *= size;
      space.inStrides.back() = stride;
      continue;
    }
    space.shape.push_back(size);
    space.inStrides.push_back(stride);
  }
  return space;
}

/// The transpose proper: the input's contiguous dim `p` is not the output's
/// innermost. Tiles of (dim p) x (innermost dim) are copied so that both the
/// reads and the writes stay within a few cache lines per row.
template <typename U>
void transposeTiled(const U *x, U *y, const TransposeSpace &space, size_t p) {
  constexpr int64_t kTile = 32;
  const size_t rank = space.shape.size(), last = rank - 1;
  const std::vector<int64_t> outStrides = contiguousStrides(space.shape);
  // The other dims form the outer loop.
  std::vector<int64_t> otherShape, otherIn, otherOut;
  for (size_t d = 0; d < last; ++d)
    if (d != p) {
      otherShape.push_back(space.shape[d]);
      otherIn.push_back(space.inStrides[d]);
      otherOut.push_back(outStrides[d]);
    }
  const int64_t outer = numElements(otherShape);
  const int64_t rowsP = space.shape[p], cols = space.shape[last];
  const int64_t inCol = space.inStrides[last], outRowP = outStrides[p];
  const int64_t tilesP = (rowsP + kTile - 1) / kTile;
  const int64_t tilesC = (cols + kTile - 1) / kTile;
  const int64_t items = outer * tilesP * tilesC;
  int threads = threadsFor(outer * rowsP * cols * int64_t(sizeof(U)), 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    int64_t o = item / (tilesP * tilesC), tile = item % (tilesP * tilesC);
    int64_t p0 = (tile / tilesC) * kTile, c0 = (tile % tilesC) * kTile;
    int64_t p1 = std::min(rowsP, p0 + kTile), c1 = std::min(cols, c0 + kTile);
    int64_t inBase = 0, outBase = 0, rest = o;
    for (size_t d = otherShape.size(); d-- > 0;) {
      int64_t i = rest % otherShape[d];
      rest /= otherShape[d];
      inBase += i * otherIn[d];
      outBase += i * otherOut[d];
    }
    for (int64_t c = c0; c < c1; ++c) {
      const U *in = x + inBase + c * inCol;
      U *out = y + outBase + c;
      for (int64_t r = p0; r < p1; ++r)
        out[r * outRowP] = in[r];
    }
  }
}

void transposeRun(const KernelArgs &args,
                  const std::vector<int64_t> &permutation) {
  const TensorRef &xRef = args.instruction.inputs[0];
  const size_t size = dtypeSize(xRef.dtype);
  const uint8_t *x = static_cast<const uint8_t *>(args.inputs[0]);
  uint8_t *y = static_cast<uint8_t *>(args.outputs[0]);
  if (xRef.elements() == 0)
    return;
  TransposeSpace space = buildTransposeSpace(xRef.shape, permutation);
  if (space.shape.size() <= 1) { // the identity, after merging
    parallelCopy(y, x, int64_t(xRef.bytes()));
    return;
  }
  const size_t last = space.shape.size() - 1;
  if (space.inStrides[last] == 1) {
    // Contiguous innermost rows: one memcpy per row.
    const int64_t inner = space.shape[last];
    const int64_t rows = numElements(space.shape) / inner;
    int threads = threadsFor(rows * inner * int64_t(size), 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(y + row * inner * size,
                  x + rowOffset(row, space.shape, space.inStrides) * size,
                  size_t(inner) * size);
    return;
  }
  size_t p = 0;
  while (space.inStrides[p] != 1)
    ++p;
  withWidth(size, [&](auto tag) {
    using U = decltype(tag);
    transposeTiled<U>(reinterpret_cast<const U *>(x), reinterpret_cast<U *>(y),
                      space, p);
  });
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

Status readSlice(const Instruction &instruction, std::vector<int64_t> &starts,
                 std::vector<int64_t> &strides) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {"starts", "strides"}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (Status s = getIntListAttr(instruction.attrs, "starts", starts, true); !s)
    return s;
  if (Status s = getIntListAttr(instruction.attrs, "strides", strides, true);
      !s)
    return s;
  size_t rank = x.shape.size();
  if (y.shape.size() != rank || starts.size() != rank || strides.size() != rank)
    return Status::error("input " + shapeString(x.shape) + ", result " +
                         shapeString(y.shape) + ", starts " +
                         shapeString(starts) + " and strides " +
                         shapeString(strides) + " must have the same rank");
  for (size_t d = 0; d < rank; ++d) {
    if (strides[d] == 0)
      return Status::error("stride of dim " + std::to_string(d) + " is 0");
    int64_t count = y.shape[d];
    if (count == 0)
      continue;
    int64_t first = starts[d], lastIndex = first + (count - 1) * strides[d];
    if (first < 0 || first >= x.shape[d] || lastIndex < 0 ||
        lastIndex >= x.shape[d])
      return Status::error("dim " + std::to_string(d) + " reads indices " +
                           std::to_string(first) + " to " +
                           std::to_string(lastIndex) + " of input " +
                           shapeString(x.shape) + ", outside [0, " +
                           std::to_string(x.shape[d]) + ")");
  }
  return Status::ok();
}

void sliceRun(const KernelArgs &args, const std::vector<int64_t> &starts,
              const std::vector<int64_t> &steps) {
  const TensorRef &xRef = args.instruction.inputs[0];
  const TensorRef &yRef = args.instruction.outputs[0];
  const size_t size = dtypeSize(xRef.dtype);
  const uint8_t *x = static_cast<const uint8_t *>(args.inputs[0]);
  uint8_t *y = static_cast<uint8_t *>(args.outputs[0]);
  const int64_t total = yRef.elements();
  if (total == 0)
    return;
  if (yRef.shape.empty()) {
    std::memcpy(y, x, size);
    return;
  }
  std::vector<int64_t> xStrides = contiguousStrides(xRef.shape);
  int64_t base = 0;
  std::vector<int64_t> strides(xStrides.size());
  for (size_t d = 0; d < xStrides.size(); ++d) {
    base += starts[d] * xStrides[d];
    strides[d] = steps[d] * xStrides[d];
  }
  const int64_t inner = yRef.shape.back(), rows = total / inner;
  int threads = threadsFor(total * int64_t(size), 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t row = 0; row < rows; ++row)
    stridedCopy(x + (base + rowOffset(row, yRef.shape, strides)) * size,
                strides.back(), inner, size, y + row * inner * size);
}

//===----------------------------------------------------------------------===//
// concat, split
//===----------------------------------------------------------------------===//

/// Checks that `pieces` stack along `axis` into `whole` (shared by concat and
/// split).
Status readPieces(const Instruction &instruction,
                  const std::vector<TensorRef> &pieces, const TensorRef &whole,
                  const char *pieceName, const char *wholeName, int64_t &axis) {
  if (Status s = expectKnownAttrs(instruction.attrs, {"axis"}); !s)
    return s;
  if (pieces.empty())
    return Status::error(std::string("expected at least one ") + pieceName);
  int64_t raw;
  if (Status s = getIntAttr(instruction.attrs, "axis", raw, true); !s)
    return s;
  if (whole.shape.empty())
    return Status::error(std::string(wholeName) + " must have rank >= 1");
  if (Status s = normalizeAxis(raw, int64_t(whole.shape.size()), axis); !s)
    return s;
  int64_t sum = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const TensorRef &piece = pieces[i];
    std::string name = std::string(pieceName) + " " + std::to_string(i);
    if (Status s = expectSameDType(piece, name, whole, wholeName); !s)
      return s;
    bool ok = piece.shape.size() == whole.shape.size();
    for (size_t d = 0; ok && d < whole.shape.size(); ++d)
      ok = int64_t(d) == axis || piece.shape[d] == whole.shape[d];
    if (!ok)
      return Status::error(name + " " + shapeString(piece.shape) +
                           " does not match " + wholeName + " " +
                           shapeString(whole.shape) + " outside axis " +
                           std::to_string(axis));
    sum += piece.shape[size_t(axis)];
  }
  if (sum != whole.shape[size_t(axis)])
    return Status::error(std::string("the ") + pieceName +
                         "s' sizes along axis " + std::to_string(axis) +
                         " sum to " + std::to_string(sum) + ", not " +
                         std::to_string(whole.shape[size_t(axis)]));
  return Status::ok();
}

/// Copies between the whole and its pieces; `toWhole` for concat.
void movePieces(const std::vector<TensorRef> &pieces, const TensorRef &whole,
                int64_t axis, uint8_t *wholeData,
                const std::vector<uint8_t *> &pieceData, bool toWhole) {
  const size_t size = dtypeSize(whole.dtype);
  const int64_t outer = dimProduct(whole.shape, 0, size_t(axis));
  const int64_t innerBytes =
      dimProduct(whole.shape, size_t(axis) + 1, whole.shape.size()) *
      int64_t(size);
  const int64_t wholeRow = whole.shape[size_t(axis)] * innerBytes;
  int64_t offset = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int64_t rowBytes = pieces[i].shape[size_t(axis)] * innerBytes;
    if (outer == 1) {
      if (toWhole)
        parallelCopy(wholeData + offset, pieceData[i], rowBytes);
      else
        parallelCopy(pieceData[i], wholeData + offset, rowBytes);
    } else {
      int threads = threadsFor(outer * rowBytes, 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        uint8_t *w = wholeData + o * wholeRow + offset;
        uint8_t *p = pieceData[i] + o * rowBytes;
        if (toWhole)
          std::memcpy(w, p, size_t(rowBytes));
        else
          std::memcpy(p, w, size_t(rowBytes));
      }
    }
    offset += rowBytes;
  }
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

/// A dropout's inputs: X, then the step if present, then the block's
/// offsets if `global_shape` is given.
struct DropoutConfig {
  double ratio = 0;
  int64_t seed = 0;
  int stepInput = -1, offsetsInput = -1;
  loomrt::DropoutBlock block;
};

Status readDropout(const Instruction &instruction, DropoutConfig &config) {
  if (Status s = expectKnownAttrs(instruction.attrs,
                                  {"ratio", "seed", "index_base", "index_chunk",
                                   "index_chunk_stride", "global_shape"});
      !s)
    return s;
  std::vector<int64_t> global;
  if (instruction.attrs.count("global_shape"))
    if (Status s =
            getIntListAttr(instruction.attrs, "global_shape", global, true);
        !s)
      return s;
  const size_t extra =
      instruction.inputs.empty() ? 0 : instruction.inputs.size() - 1;
  const bool hasOffsets = instruction.attrs.count("global_shape");
  if (extra < size_t(hasOffsets) || extra > size_t(hasOffsets) + 1)
    return Status::error(
        "takes X, an optional step and, with global_shape, the offsets; got " +
        std::to_string(instruction.inputs.size()) + " inputs");
  if (Status s = expectOperandCounts(instruction, 1 + extra, 2); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0],
                  &mask = instruction.outputs[1];
  if (Status s = expectFloat(x.dtype, "input"); !s)
    return s;
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (Status s = expectSameShape(x, "input", y, "result"); !s)
    return s;
  if (Status s = expectSameShape(x, "input", mask, "mask"); !s)
    return s;
  if (mask.dtype != DType::I1)
    return Status::error(std::string("mask has dtype ") +
                         dtypeName(mask.dtype) + "; expected i1");
  if (Status s = getDoubleAttr(instruction.attrs, "ratio", config.ratio, true);
      !s)
    return s;
  if (!(config.ratio >= 0 && config.ratio < 1))
    return Status::error("ratio " + std::to_string(config.ratio) +
                         " is outside [0, 1)");
  if (Status s = getIntAttr(instruction.attrs, "seed", config.seed, true); !s)
    return s;
  int64_t base = 0;
  if (Status s = getIntAttr(instruction.attrs, "index_base", base, false); !s)
    return s;
  if (base < 0)
    return Status::error("index_base " + std::to_string(base) + " is negative");
  int64_t chunk = 0, chunkStride = 0;
  if (Status s = getIntAttr(instruction.attrs, "index_chunk", chunk, false); !s)
    return s;
  if (Status s = getIntAttr(instruction.attrs, "index_chunk_stride",
                            chunkStride, false);
      !s)
    return s;
  if (chunk < 0 || (chunk > 0 && chunkStride < chunk))
    return Status::error("index_chunk " + std::to_string(chunk) +
                         " needs an index_chunk_stride of at least itself");
  config.block.base = base;
  if (extra == size_t(hasOffsets) + 1) {
    config.stepInput = 1;
    const TensorRef &step = instruction.inputs[1];
    if (step.dtype != DType::F64 || step.elements() != 1)
      return Status::error("step must be one f64, not " +
                           std::string(dtypeName(step.dtype)) + " " +
                           shapeString(step.shape));
  }
  config.block.chunk = chunk;
  config.block.chunkStride = chunkStride;
  if (!hasOffsets)
    return Status::ok();
  config.offsetsInput = int(instruction.inputs.size()) - 1;
  const TensorRef &offsets = instruction.inputs[config.offsetsInput];
  const int rank = int(x.shape.size());
  if (global.size() != x.shape.size() || rank > loomrt::kDropoutMaxRank)
    return Status::error("global_shape " + shapeString(global) +
                         " must have the rank of the input " +
                         shapeString(x.shape) + " (at most " +
                         std::to_string(loomrt::kDropoutMaxRank) + ")");
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    if (global[d] < x.shape[d])
      return Status::error("global_shape " + shapeString(global) +
                           " is smaller than the block " +
                           shapeString(x.shape));
    if (global[d] > 0 && elements > (INT64_MAX - base) / global[d])
      return Status::error("global_shape " + shapeString(global) +
                           " has more elements than an index holds");
    elements *= global[d];
  }
  if (offsets.dtype != DType::I64 || offsets.elements() != rank)
    return Status::error("offsets must be " + std::to_string(rank) +
                         " i64, not " + std::string(dtypeName(offsets.dtype)) +
                         " " + shapeString(offsets.shape));
  config.block =
      loomrt::makeDropoutBlock(x.shape.data(), global.data(), rank, base);
  config.block.chunk = chunk;
  config.block.chunkStride = chunkStride;
  return Status::ok();
}

template <typename T>
void dropoutTyped(const KernelArgs &args, const DropoutConfig &config) {
  const int64_t n = args.instruction.inputs[0].elements();
  const T *x = static_cast<const T *>(args.inputs[0]);
  T *y = static_cast<T *>(args.outputs[0]);
  uint8_t *mask = static_cast<uint8_t *>(args.outputs[1]);
  const double step =
      config.stepInput < 0
          ? 0.0
          : *static_cast<const double *>(args.inputs[config.stepInput]);
  const int64_t *offsets =
      config.offsetsInput < 0
          ? nullptr
          : static_cast<const int64_t *>(args.inputs[config.offsetsInput]);
  const uint64_t stream = loomrt::dropoutStream(config.seed, step);
  const double threshold = config.ratio * double(1 << 24);
  const T scale = T(1 / (1 - config.ratio));
  int threads = threadsFor(n, 1 << 14);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < n; ++k) {
    bool keep = loomrt::dropoutKeeps(
        stream, loomrt::dropoutIndex(config.block, offsets, k), threshold);
    mask[k] = keep;
    y[k] = keep ? x[k] * scale : T(0);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// scatter_add
//===----------------------------------------------------------------------===//

namespace {

Status readScatterAdd(const Instruction &instruction) {
  if (Status s = expectOperandCounts(instruction, 2, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {}); !s)
    return s;
  const TensorRef &updates = instruction.inputs[0],
                  &indices = instruction.inputs[1], &y = instruction.outputs[0];
  if (Status s = expectFloat(updates.dtype, "updates"); !s)
    return s;
  if (Status s = expectSameDType(updates, "updates", y, "result"); !s)
    return s;
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return Status::error(std::string("indices have dtype ") +
                         dtypeName(indices.dtype) + "; expected i32 or i64");
  if (y.shape.empty())
    return Status::error("result must have rank >= 1");
  std::vector<int64_t> expected = indices.shape;
  expected.insert(expected.end(), y.shape.begin() + 1, y.shape.end());
  if (updates.shape != expected)
    return Status::error("updates " + shapeString(updates.shape) +
                         " should be " + shapeString(expected) +
                         " for indices " + shapeString(indices.shape) +
                         " and result " + shapeString(y.shape));
  return Status::ok();
}

/// Threads own disjoint column ranges of the result, so the sums need no
/// atomics and are the same for every thread count (index order).
template <typename T, typename I> void scatterAddTyped(const KernelArgs &args) {
  const Instruction &instruction = args.instruction;
  const int64_t rows = instruction.outputs[0].shape[0];
  const int64_t width =
      instruction.outputs[0].elements() / std::max<int64_t>(rows, 1);
  const int64_t count = instruction.inputs[1].elements();
  const T *updates = static_cast<const T *>(args.inputs[0]);
  const I *indices = static_cast<const I *>(args.inputs[1]);
  T *y = static_cast<T *>(args.outputs[0]);
  std::memset(y, 0, size_t(rows * width) * sizeof(T));
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = int64_t(indices[j]);
    if (index < -rows || index >= rows) {
      reportError(args, "index " + std::to_string(index) + " at position " +
                            std::to_string(j) + " is outside [-" +
                            std::to_string(rows) + ", " + std::to_string(rows) +
                            ")");
      return;
    }
  }
  constexpr int64_t kColumns = 64;
  const int64_t chunks = (width + kColumns - 1) / kColumns;
  int threads = threadsFor(count * width, 1 << 16);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kColumns,
                  end = std::min(width, begin + kColumns);
    for (int64_t j = 0; j < count; ++j) {
      int64_t index = int64_t(indices[j]);
      if (index < 0)
        index += rows;
      T *dst = y + index * width;
      const T *src = updates + j * width;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c)
        dst[c] += src[c];
    }
  }
}

} // namespace

Status cpu::check_scatter_add(const Instruction &instruction) {
  return readScatterAdd(instruction);
}
void cpu::run_scatter_add(const KernelArgs &args) {
  bool f32 = args.instruction.inputs[0].dtype == DType::F32;
  bool i32 = args.instruction.inputs[1].dtype == DType::I32;
  if (f32 && i32)
    scatterAddTyped<float, int32_t>(args);
  else if (f32)
    scatterAddTyped<float, int64_t>(args);
  else if (i32)
    scatterAddTyped<double, int32_t>(args);
  else
    scatterAddTyped<double, int64_t>(args);
}

Status cpu::check_gather(const Instruction &instruction) {
  int64_t axis;
  return readGather(instruction, axis);
}
void cpu::run_gather(const KernelArgs &args) {
  int64_t axis;
  (void)readGather(args.instruction, axis);
  if (args.instruction.inputs[1].dtype == DType::I32)
    gatherTyped<int32_t>(args, axis);
  else
    gatherTyped<int64_t>(args, axis);
}

Status cpu::check_transpose(const Instruction &instruction) {
  std::vector<int64_t> permutation;
  return readTranspose(instruction, permutation);
}
void cpu::run_transpose(const KernelArgs &args) {
  std::vector<int64_t> permutation;
  (void)readTranspose(args.instruction, permutation);
  transposeRun(args, permutation);
}

Status cpu::check_slice(const Instruction &instruction) {
  std::vector<int64_t> starts, strides;
  return readSlice(instruction, starts, strides);
}
void cpu::run_slice(const KernelArgs &args) {
  std::vector<int64_t> starts, strides;
  (void)readSlice(args.instruction, starts, strides);
  sliceRun(args, starts, strides);
}

Status cpu::check_concat(const Instruction &instruction) {
  int64_t axis;
  if (instruction.outputs.size() != 1)
    return Status::error("expected 1 output, got " +
                         std::to_string(instruction.outputs.size()));
  return readPieces(instruction, instruction.inputs, instruction.outputs[0],
                    "input", "result", axis);
}
void cpu::run_concat(const KernelArgs &args) {
  const Instruction &instruction = args.instruction;
  int64_t axis;
  (void)readPieces(instruction, instruction.inputs, instruction.outputs[0],
                   "input", "result", axis);
  std::vector<uint8_t *> pieces;
  for (size_t i = 0; i < instruction.inputs.size(); ++i)
    pieces.push_back(
        const_cast<uint8_t *>(static_cast<const uint8_t *>(args.inputs[i])));
  movePieces(instruction.inputs, instruction.outputs[0], axis,
             static_cast<uint8_t *>(args.outputs[0]), pieces, true);
}

Status cpu::check_split(const Instruction &instruction) {
  int64_t axis;
  if (instruction.inputs.size() != 1)
    return Status::error("expected 1 input, got " +
                         std::to_string(instruction.inputs.size()));
  return readPieces(instruction, instruction.outputs, instruction.inputs[0],
                    "output", "input", axis);
}
void cpu::run_split(const KernelArgs &args) {
  const Instruction &instruction = args.instruction;
  int64_t axis;
  (void)readPieces(instruction, instruction.outputs, instruction.inputs[0],
                   "output", "input", axis);
  std::vector<uint8_t *> pieces;
  for (size_t i = 0; i < instruction.outputs.size(); ++i)
    pieces.push_back(static_cast<uint8_t *>(args.outputs[i]));
  movePieces(
      instruction.outputs, instruction.inputs[0], axis,
      const_cast<uint8_t *>(static_cast<const uint8_t *>(args.inputs[0])),
      pieces, false);
}

Status cpu::check_copy(const Instruction &instruction) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (x.elements() != y.elements())
    return Status::error("input " + shapeString(x.shape) + " and result " +
                         shapeString(y.shape) +
                         " have different element counts");
  return Status::ok();
}
void cpu::run_copy(const KernelArgs &args) {
  parallelCopy(args.outputs[0], args.inputs[0],
               int64_t(args.instruction.inputs[0].bytes()));
}

Status cpu::check_dropout(const Instruction &instruction) {
  DropoutConfig config;
  return readDropout(instruction, config);
}
void cpu::run_dropout(const KernelArgs &args) {
  DropoutConfig config;
  (void)readDropout(args.instruction, config);
  if (args.instruction.inputs[0].dtype == DType::F32)
    dropoutTyped<float>(args, config);
  else
    dropoutTyped<double>(args, config);
}
