//===- ScatterAdd.cu - Deterministic CUDA scatter_add ---------------------===//
//
// y[indices[j], ...] += updates[j, ...], summed in index order as the CPU
// kernel sums: bit for bit the CPU's result, and the same on every run.
// Atomic adds would sum one row's updates in whatever order the threads
// reach it, so an embedding's gradient (and every loss after it) would
// differ from run to run, and a CUDA graph replay from the run it recorded.
//
// The positions are sorted by (row, position): each position's 64-bit key
// is (row << 32) | position, all distinct, so an unstable bitonic sort of
// the keys is a stable sort of the positions by row. Tiles of kSortTile
// keys sort in shared memory; the longer strides of the merges run one
// launch each. Then one thread per (segment start, column) sums its row's
// updates in position order. Out-of-range indices are recorded in the
// DeviceError and sort last with the padding, so nothing adds them.
//
// The keys live in the launch context's workspace (8 bytes per position,
// rounded up to a power of two): a plan whose scatter_add needs more is
// refused when the kernel is created.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

constexpr int kSortThreads = 512;
/// Keys one block sorts in shared memory: two per thread.
constexpr int64_t kSortTile = 2 * kSortThreads;
/// The key of padding and of out-of-range indices: sorts after every row.
constexpr uint64_t kNoRow = ~uint64_t(0);

__device__ inline uint32_t rowOf(uint64_t key) { return uint32_t(key >> 32); }

template <typename Idx>
__global__ void scatterKeysKernel(const Idx *indices, uint64_t *keys,
                                  int64_t count, int64_t padded, int64_t rows,
                                  DeviceError *error, int32_t instruction) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < padded;
       p += int64_t(gridDim.x) * blockDim.x) {
    uint64_t key = kNoRow;
    if (p < count) {
      const int64_t raw = int64_t(indices[p]);
      const int64_t index = raw < 0 ? raw + rows : raw;
      if (index < 0 || index >= rows)
        recordError(error, DeviceError::IndexOutOfRange, instruction, raw, p,
                    rows);
      else
        key = (uint64_t(index) << 32) | uint64_t(p);
    }
    keys[p] = key;
  }
}

/// Orders keys[i] < keys[l] (ascending) or the reverse.
__device__ inline void orderPair(uint64_t &a, uint64_t &b, bool ascending) {
  if ((a > b) == ascending) {
    const uint64_t t = a;
    a = b;
    b = t;
  }
}

/// The bitonic network's stages (size, stride) for size in [firstSize,
/// lastSize] and every stride below both size and `tile`, on the block's
/// `tile` keys in shared memory. A pair's direction comes from its global
/// index, so tiles alternate as the next merge needs.
__global__ void bitonicTileKernel(uint64_t *keys, int64_t firstSize,
                                  int64_t lastSize, int64_t tile) {
  __shared__ uint64_t shared[kSortTile];
  const int64_t base = int64_t(blockIdx.x) * tile;
  for (int64_t i = threadIdx.x; i < tile; i += blockDim.x)
    shared[i] = keys[base + i];
  __syncthreads();
  for (int64_t size = firstSize; size <= lastSize; size <<= 1)
    for (int64_t stride = min(size, tile) / 2; stride > 0; stride >>= 1) {
      for (int64_t t = threadIdx.x; t < tile / 2; t += blockDim.x) {
        const int64_t i = 2 * stride * (t / stride) + t % stride;
        orderPair(shared[i], shared[i + stride], ((base + i) & size) == 0);
      }
      __syncthreads();
    }
  for (int64_t i = threadIdx.x; i < tile; i += blockDim.x)
    keys[base + i] = shared[i];
}

/// One stage (size, stride) of the bitonic network over all keys, for the
/// strides longer than a tile.
__global__ void bitonicStageKernel(uint64_t *keys, int64_t padded, int64_t size,
                                   int64_t stride) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       t < padded / 2; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = 2 * stride * (t / stride) + t % stride;
    orderPair(keys[i], keys[i + stride], (i & size) == 0);
  }
}

/// Thread (p, c) with p the first sorted position of its row sums that
/// row's updates of column c in position order, as the CPU does.
template <typename T>
__global__ void scatterSumKernel(const T *updates, const uint64_t *keys, T *y,
                                 int64_t count, int64_t width, int64_t rows) {
  const int64_t total = count * width;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / width, c = i % width;
    const uint32_t row = rowOf(keys[p]);
    if (int64_t(row) >= rows || (p > 0 && rowOf(keys[p - 1]) == row))
      continue;
    T sum = T(0);
    for (int64_t q = p; q < count && rowOf(keys[q]) == row; ++q)
      sum += updates[int64_t(keys[q] & 0xffffffffu) * width + c];
    y[int64_t(row) * width + c] = sum;
  }
}

/// The number of sort keys: `count` rounded up to a power of two (>= 2).
int64_t paddedCount(int64_t count) {
  int64_t padded = 2;
  while (padded < count)
    padded <<= 1;
  return padded;
}

/// Sorts the keys of `count` positions (see the file comment).
template <typename Idx>
Status sortPositions(const LaunchContext &context, const Idx *indices,
                     uint64_t *keys, int64_t count, int64_t rows) {
  const int64_t padded = paddedCount(count);
  launchKernel(scatterKeysKernel<Idx>, gridFor(padded), kThreads, 0,
               context.stream, indices, keys, count, padded, rows,
               context.error, context.instruction);
  const int64_t tile = std::min(padded, kSortTile);
  const unsigned tiles = unsigned(padded / tile);
  const unsigned threads = unsigned(tile / 2);
  launchKernel(bitonicTileKernel, tiles, threads, 0, context.stream, keys,
               int64_t(2), tile, tile);
  for (int64_t size = 2 * tile; size <= padded; size <<= 1) {
    for (int64_t stride = size / 2; stride >= tile; stride >>= 1)
      launchKernel(bitonicStageKernel, gridFor(padded / 2), kThreads, 0,
                   context.stream, keys, padded, size, stride);
    launchKernel(bitonicTileKernel, tiles, threads, 0, context.stream, keys,
                 size, size, tile);
  }
  return launchStatus("scatter_add (sorting the indices)");
}

} // namespace

KernelOr cuda::createScatterAdd(const LaunchContext &context,
                                const Instruction &inst) {
  const TensorRef &y = inst.outputs[0];
  const int64_t rows = y.shape[0];
  const int64_t width = product(y.shape, 1, y.shape.size());
  const int64_t count = inst.inputs[1].elements();
  if (rows >= (int64_t(1) << 32) - 1 || count > (int64_t(1) << 32))
    return Status::error("scatter_add of " + std::to_string(count) +
                         " indices into " + std::to_string(rows) +
                         " rows: the CUDA kernel sorts 32-bit rows and "
                         "positions");
  const uint64_t keyBytes = uint64_t(paddedCount(count)) * sizeof(uint64_t);
  if (count > 0 && keyBytes > context.workspaceBytes)
    return Status::error(
        "scatter_add of " + std::to_string(count) + " indices sorts " +
        std::to_string(keyBytes) + " bytes of keys, more than the " +
        std::to_string(context.workspaceBytes) + "-byte workspace");
  auto make = [&](auto tag, auto indexTag) {
    using T = decltype(tag);
    using Idx = decltype(indexTag);
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      T *out = static_cast<T *>(outputs[0]);
      if (Status s = cudaStatus(
              cudaMemsetAsync(out, 0, uint64_t(rows * width) * sizeof(T),
                              context.stream),
              "scatter_add (zeroing)");
          !s)
        return s;
      if (count * width == 0)
        return Status::ok();
      auto *keys = static_cast<uint64_t *>(context.workspace);
      if (Status s = sortPositions(context, static_cast<const Idx *>(inputs[1]),
                                   keys, count, rows);
          !s)
        return s;
      launchKernel(scatterSumKernel<T>, gridFor(count * width), kThreads, 0,
                   context.stream, static_cast<const T *>(inputs[0]), keys, out,
                   count, width, rows);
      return launchStatus("scatter_add");
    });
  };
  return dispatchFloatAndIndex(inst.inputs[0].dtype, inst.inputs[1].dtype, make,
                               "scatter_add");
}
