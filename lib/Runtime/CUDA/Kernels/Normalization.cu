//===- Normalization.cu - CUDA softmax, layer_norm, cross_entropy ---------===//
//
// Kernels that normalize along an axis, with the CPU kernels' semantics:
// softmax subtracts the row maximum first (a maximum that ignores NaN, as the
// CPU's does; a NaN still reaches every output through the sum), statistics
// (sums of exponentials, means, variances) accumulate in double, layer_norm
// uses the biased variance in two passes, cross_entropy skips ignore_index
// samples and averages over the samples it counted.
//
// Rows along the last axis get a warp each, or a block each when longer than
// kWarpRowMax; every pass re-reads the row (from L1/L2 for short rows), so
// cross_entropy finds a row's max and sum of exponentials in one pass.
// Softmax along another axis gives each (outer, inner) column a thread, so
// that loads coalesce along the inner dim.
//
// layer_norm_backward recomputes each row's statistics while it writes dx
// (a warp or block per row, as the forward), keeping them in the workspace
// for a column pass: a thread per column sums dscale and dbias over a chunk
// of rows, and a last pass adds the chunks in order. No atomics, so the
// gradients are the same from run to run. With an f32 input, layer_norm
// may write bf16 and layer_norm_backward read a bf16 dout (mixed
// precision's casts, folded in).
//
// cross_entropy with reduction=mean|sum writes each sample's loss to the
// workspace and a one-block kernel sums them in a fixed order (no atomics:
// the loss is the same from run to run); it needs 8 bytes of workspace per
// sample. cross_entropy_backward recomputes each row's maximum and sum of
// exponentials (a warp or block per row) and writes the gradient, so the
// probabilities are never stored. cross_entropy with a gradient output
// (loom.cross_entropy_with_grad) is that kernel storing each sample's loss
// too; a block row that fits twice in an SM's shared memory is copied there
// once, so the logits are read from memory once for both. Both read bf16
// logits as they are and compute in f32 (f64 for f64).
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <cmath>
#include <limits>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

template <typename T> __device__ inline T negativeInfinity() {
  return -std::numeric_limits<T>::infinity();
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

template <typename T, bool Log, bool Block>
__global__ void softmaxRows(const T *x, T *y, int64_t rows, int64_t n) {
  RowGroup<Block> g;
  if (g.row >= rows)
    return;
  const T *in = x + g.row * n;
  T *out = y + g.row * n;
  T max = negativeInfinity<T>();
  for (int64_t i = g.lane; i < n; i += g.size)
    max = MaxIgnoreNaNOp()(max, in[i]);
  max = groupReduce<Block>(max, MaxIgnoreNaNOp());
  double sum = 0;
  for (int64_t i = g.lane; i < n; i += g.size)
    sum += double(expOf(in[i] - max));
  sum = groupReduce<Block>(sum, SumOp());
  // Every read of the row is done (the reductions synchronized the group),
  // so y may be x.
  if constexpr (Log) {
    const T logSum = T(log(sum));
    for (int64_t i = g.lane; i < n; i += g.size)
      out[i] = (in[i] - max) - logSum;
  } else {
    const T scale = T(1 / sum);
    for (int64_t i = g.lane; i < n; i += g.size)
      out[i] = expOf(in[i] - max) * scale;
  }
}

/// Softmax along the middle dim of outer x n x inner: a thread per column.
template <typename T, bool Log>
__global__ void softmaxColumns(const T *x, T *y, int64_t outer, int64_t n,
                               int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    T max = negativeInfinity<T>();
    for (int64_t i = 0; i < n; ++i)
      max = MaxIgnoreNaNOp()(max, x[base + i * inner]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += double(expOf(x[base + i * inner] - max));
    if constexpr (Log) {
      const T logSum = T(log(sum));
      for (int64_t i = 0; i < n; ++i)
        y[base + i * inner] = (x[base + i * inner] - max) - logSum;
    } else {
      const T scale = T(1 / sum);
      for (int64_t i = 0; i < n; ++i)
        y[base + i * inner] = expOf(x[base + i * inner] - max) * scale;
    }
  }
}

template <typename T, bool Log>
Status launchSoftmax(cudaStream_t stream, const T *x, T *y, int64_t outer,
                     int64_t n, int64_t inner) {
  if (outer * n * inner == 0)
    return Status::ok();
  if (inner == 1) {
    bool block = n > kWarpRowMax;
    unsigned blocks = rowBlocks(outer, block);
    if (block)
      launchKernel(softmaxRows<T, Log, true>, blocks, kRowThreads, 0, stream, x,
                   y, outer, n);
    else
      launchKernel(softmaxRows<T, Log, false>, blocks, kRowThreads, 0, stream,
                   x, y, outer, n);
  } else {
    launchKernel(softmaxColumns<T, Log>, gridFor(outer * inner), kThreads, 0,
                 stream, x, y, outer, n, inner);
  }
  return launchStatus(Log ? "log_softmax" : "softmax");
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// O is T, or bf16 for f32 (the f32 result rounded once).
template <typename T, typename O, bool Block>
__global__ void layerNormRows(const T *x, const T *scale, const T *bias, O *y,
                              int64_t rows, int64_t n, double epsilon) {
  RowGroup<Block> g;
  if (g.row >= rows)
    return;
  const T *in = x + g.row * n;
  O *out = y + g.row * n;
  // Two passes (mean, then squared deviations): no cancellation.
  double sum = 0;
  for (int64_t i = g.lane; i < n; i += g.size)
    sum += double(in[i]);
  sum = groupReduce<Block>(sum, SumOp());
  const double mean = n ? sum / double(n) : 0;
  double squares = 0;
  for (int64_t i = g.lane; i < n; i += g.size) {
    double d = double(in[i]) - mean;
    squares += d * d;
  }
  squares = groupReduce<Block>(squares, SumOp());
  const double variance = n ? squares / double(n) : 0;
  const T rstd = T(1 / sqrt(variance + epsilon));
  const T m = T(mean);
  for (int64_t i = g.lane; i < n; i += g.size)
    store(out + i, T((in[i] - m) * rstd * scale[i] + bias[i]));
}

//===----------------------------------------------------------------------===//
// layer_norm_backward
//===----------------------------------------------------------------------===//

/// One row's mean and 1 / sqrt(variance + epsilon), kept in the workspace
/// for the column pass.
struct RowStats {
  double mean, rstd;
};

/// dx of each row; records the row's statistics (recomputed as the forward
/// computes them) in `stats`. D (dy's type) is T, or bf16 for f32. A
/// non-null `addend` is added to each (rounded) element before it is stored;
/// a non-null `narrow` receives dx rounded to bf16 as well.
template <typename T, typename D, bool Block>
__global__ void layerNormBackwardRows(const T *x, const T *scale, const D *dy,
                                      const T *addend, T *dx, BF16 *narrow,
                                      RowStats *stats, int64_t rows, int64_t n,
                                      double epsilon) {
  RowGroup<Block> g;
  if (g.row >= rows)
    return;
  const T *in = x + g.row * n;
  const D *grad = dy + g.row * n;
  double sum = 0;
  for (int64_t i = g.lane; i < n; i += g.size)
    sum += double(in[i]);
  const double mean = groupReduce<Block>(sum, SumOp()) / double(n);
  double squares = 0;
  for (int64_t i = g.lane; i < n; i += g.size) {
    double d = double(in[i]) - mean;
    squares += d * d;
  }
  squares = groupReduce<Block>(squares, SumOp());
  const double rstd = 1 / sqrt(squares / double(n) + epsilon);
  const T m = T(mean), r = T(rstd);
  double sumG = 0, sumGX = 0;
  for (int64_t i = g.lane; i < n; i += g.size) {
    T gi = T(widen(grad[i])) * scale[i];
    sumG += double(gi);
    sumGX += double(gi * ((in[i] - m) * r));
  }
  sumG = groupReduce<Block>(sumG, SumOp());
  sumGX = groupReduce<Block>(sumGX, SumOp());
  const T meanG = T(sumG / double(n)), meanGX = T(sumGX / double(n));
  T *out = dx + g.row * n;
  const T *add = addend ? addend + g.row * n : nullptr;
  BF16 *copy = narrow ? narrow + g.row * n : nullptr;
  for (int64_t i = g.lane; i < n; i += g.size) {
    T xhat = (in[i] - m) * r;
    T value = r * (T(widen(grad[i])) * scale[i] - meanG - xhat * meanGX);
    if (add)
      value = add[i] + value;
    out[i] = value;
    if (copy)
      store(copy + i, float(value));
  }
  if (g.lane == 0)
    stats[g.row] = {mean, rstd};
}

/// Partial dscale and dbias of one chunk of rows: a thread per column (loads
/// coalesce along the row), the chunk's rows summed in order into
/// `partial[chunk][0 | 1][n]`.
template <typename T, typename D>
__global__ void layerNormParamPartials(const T *x, const D *dy,
                                       const RowStats *stats, double *partial,
                                       int64_t rows, int64_t n,
                                       int64_t rowsPerChunk) {
  const int64_t column = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= n)
    return;
  const int64_t first = int64_t(blockIdx.y) * rowsPerChunk;
  const int64_t last = min(rows, first + rowsPerChunk);
  double sumScale = 0, sumBias = 0;
  for (int64_t r = first; r < last; ++r) {
    double grad = double(widen(dy[r * n + column]));
    RowStats st = stats[r];
    sumScale += grad * ((double(x[r * n + column]) - st.mean) * st.rstd);
    sumBias += grad;
  }
  double *out = partial + int64_t(blockIdx.y) * 2 * n;
  out[column] = sumScale;
  out[n + column] = sumBias;
}

/// dscale and dbias: the chunks' partial sums, in chunk order.
template <typename T>
__global__ void layerNormParamTotals(const double *partial, int64_t chunks,
                                     int64_t n, T *dscale, T *dbias) {
  for (int64_t column = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       column < n; column += int64_t(gridDim.x) * blockDim.x) {
    double sumScale = 0, sumBias = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sumScale += partial[c * 2 * n + column];
      sumBias += partial[c * 2 * n + n + column];
    }
    dscale[column] = T(sumScale);
    dbias[column] = T(sumBias);
  }
}

/// The shape of one layer_norm_backward launch and its workspace: the row
/// statistics, then `chunks` pairs of partial column sums.
struct LayerNormBackwardPlan {
  int64_t rows = 0, n = 0, chunks = 1, rowsPerChunk = 0;
  double epsilon = 1e-5;
  uint64_t statsBytes() const { return uint64_t(rows) * sizeof(RowStats); }
  uint64_t workspaceBytes() const {
    return statsBytes() + uint64_t(chunks) * 2 * uint64_t(n) * sizeof(double);
  }
};

template <typename T, typename D>
Status launchLayerNormBackward(const LaunchContext &context,
                               const LayerNormBackwardPlan &p, const T *x,
                               const T *scale, const D *dy, const T *addend,
                               T *dx, T *dscale, T *dbias, BF16 *narrow) {
  if (p.n == 0)
    return Status::ok();
  if (!context.workspace || context.workspaceBytes < p.workspaceBytes())
    return Status::error("layer_norm_backward needs " +
                         std::to_string(p.workspaceBytes()) +
                         " bytes of workspace, the launch has " +
                         std::to_string(context.workspaceBytes));
  auto *stats = static_cast<RowStats *>(context.workspace);
  auto *partial = reinterpret_cast<double *>(
      static_cast<uint8_t *>(context.workspace) + p.statsBytes());
  if (p.rows > 0) {
    bool block = p.n > kWarpRowMax;
    unsigned blocks = rowBlocks(p.rows, block);
    if (block)
      launchKernel(layerNormBackwardRows<T, D, true>, blocks, kRowThreads, 0,
                   context.stream, x, scale, dy, addend, dx, narrow, stats,
                   p.rows, p.n, p.epsilon);
    else
      launchKernel(layerNormBackwardRows<T, D, false>, blocks, kRowThreads, 0,
                   context.stream, x, scale, dy, addend, dx, narrow, stats,
                   p.rows, p.n, p.epsilon);
    if (Status s = launchStatus("layer_norm_backward (rows)"); !s)
      return s;
    dim3 grid(unsigned((p.n + kThreads - 1) / kThreads), unsigned(p.chunks));
    launchKernel(layerNormParamPartials<T, D>, grid, kThreads, 0,
                 context.stream, x, dy, stats, partial, p.rows, p.n,
                 p.rowsPerChunk);
    if (Status s = launchStatus("layer_norm_backward (columns)"); !s)
      return s;
  }
  // No rows: the partial sums are 0 (one chunk, zeroed).
  if (p.rows == 0)
    if (cudaMemsetAsync(partial, 0, 2 * uint64_t(p.n) * sizeof(double),
                        context.stream) != cudaSuccess)
      return launchStatus("layer_norm_backward (zero)");
  launchKernel(layerNormParamTotals<T>, gridFor(p.n), kThreads, 0,
               context.stream, partial, p.chunks, p.n, dscale, dbias);
  return launchStatus("layer_norm_backward (totals)");
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

struct CrossEntropyParams {
  /// Rows of `width` logits whose first `classes` are classes (the rest is
  /// padding that takes no part).
  int64_t rows = 0, width = 0, classes = 0;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  enum class Reduction { None, Mean, Sum } reduction = Reduction::Mean;
};

/// The type cross-entropy computes in and returns its loss in: f32 for f32
/// and bf16 logits, f64 for f64.
template <typename T> using LossOf = decltype(widen(T()));

/// A row's maximum (ignoring NaN) and sum of e^(x - max) over the group,
/// in one pass over the row (a vocabulary-sized row is 100 KB): each lane
/// keeps the sum for its own running maximum and rescales it when that
/// grows (online softmax); the lanes' sums are rescaled to the row's
/// maximum when combined. -inf entries add nothing; NaN ones make the sum
/// NaN, as in the two-pass form.
template <bool Block, typename T, typename A = LossOf<T>>
__device__ void rowExpSum(const T *row, int64_t classes,
                          const RowGroup<Block> &g, A &max, double &sum) {
  A laneMax = negativeInfinity<A>();
  double laneSum = 0;
  for (int64_t c = g.lane; c < classes; c += g.size) {
    const A x = widen(row[c]);
    if (x > laneMax) {
      laneSum = laneSum * double(expOf(laneMax - x)) + 1;
      laneMax = x;
    } else if (x != negativeInfinity<A>()) {
      laneSum += double(expOf(x - laneMax));
    }
  }
  max = groupReduce<Block>(laneMax, MaxIgnoreNaNOp());
  // A lane without entries (or only -inf ones) adds 0 * e^(-inf - max).
  sum = groupReduce<Block>(
      laneSum == 0 ? 0.0 : laneSum * double(expOf(laneMax - max)), SumOp());
}

enum class LabelKind { Counted, Ignored, Invalid };

/// What a row's label says; the first lane records an out-of-range one.
/// `label` is the same for the whole group, so the callers' branches on
/// the result are uniform.
template <bool Block>
__device__ LabelKind classifyLabel(int64_t label, const CrossEntropyParams &p,
                                   const RowGroup<Block> &g, DeviceError *error,
                                   int32_t instruction) {
  if (p.hasIgnore && label == p.ignoreIndex)
    return LabelKind::Ignored;
  if (label >= 0 && label < p.classes)
    return LabelKind::Counted;
  if (g.lane == 0)
    recordError(error, DeviceError::LabelOutOfRange, instruction, label, g.row,
                p.classes);
  return LabelKind::Invalid;
}

/// Each sample's loss: to `loss` (reduction=none) or to `perSample`.
/// Out-of-range labels are recorded in `error` and give NaN.
template <typename T, typename L, bool Block>
__global__ void crossEntropyRows(const T *logits, const L *labels,
                                 LossOf<T> *loss, double *perSample,
                                 CrossEntropyParams p, DeviceError *error,
                                 int32_t instruction) {
  using A = LossOf<T>;
  RowGroup<Block> g;
  if (g.row >= p.rows)
    return;
  const int64_t label = int64_t(labels[g.row]);
  const LabelKind kind = classifyLabel(label, p, g, error, instruction);
  double sampleLoss;
  if (kind == LabelKind::Ignored) {
    sampleLoss = 0;
  } else if (kind == LabelKind::Invalid) {
    sampleLoss = std::numeric_limits<double>::quiet_NaN();
  } else {
    const T *row = logits + g.row * p.width;
    A max;
    double sum;
    rowExpSum(row, p.classes, g, max, sum);
    sampleLoss = double(max) + log(sum) - double(widen(row[label]));
  }
  if (g.lane != 0)
    return;
  if (p.reduction == CrossEntropyParams::Reduction::None)
    loss[g.row] = A(sampleLoss);
  else
    perSample[g.row] = sampleLoss;
}

constexpr int kSumThreads = 1024;

/// One block: the sum (or the mean over counted samples) of `perSample`.
template <typename A, typename L>
__global__ void crossEntropyTotal(const double *perSample, const L *labels,
                                  A *loss, CrossEntropyParams p) {
  double total = 0;
  unsigned long long counted = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) {
    total += perSample[i];
    int64_t label = int64_t(labels[i]);
    bool ignored = p.hasIgnore && label == p.ignoreIndex;
    counted += !ignored && label >= 0 && label < p.classes;
  }
  total = groupReduce<true>(total, SumOp());
  counted = groupReduce<true>(counted, SumOp());
  if (threadIdx.x != 0)
    return;
  if (p.reduction == CrossEntropyParams::Reduction::Sum)
    loss[0] = A(total);
  else
    loss[0] = A(total / double(counted)); // NaN when nothing counted
}

/// A reduced loss keeps each sample's loss in the workspace (8 bytes each).
Status checkLossWorkspace(const LaunchContext &context,
                          const CrossEntropyParams &p, bool reduce) {
  if (!reduce || p.rows == 0 ||
      (context.workspace && context.workspaceBytes >= uint64_t(p.rows) * 8))
    return Status::ok();
  return Status::error("cross_entropy needs " + std::to_string(p.rows * 8) +
                       " bytes of workspace, the launch has " +
                       std::to_string(context.workspaceBytes));
}

/// The sum or mean of the per-sample losses, in one block.
template <typename A, typename L>
Status launchLossTotal(const LaunchContext &context, const double *perSample,
                       const L *labels, A *loss, const CrossEntropyParams &p) {
  launchKernel(crossEntropyTotal<A, L>, 1, kSumThreads, 0, context.stream,
               perSample, labels, loss, p);
  return launchStatus("cross_entropy (total)");
}

template <typename T, typename L>
Status launchCrossEntropy(const LaunchContext &context, const T *logits,
                          const L *labels, LossOf<T> *loss,
                          const CrossEntropyParams &p) {
  const bool reduce = p.reduction != CrossEntropyParams::Reduction::None;
  double *perSample = static_cast<double *>(context.workspace);
  if (Status s = checkLossWorkspace(context, p, reduce); !s)
    return s;
  if (p.rows > 0) {
    bool block = p.classes > kWarpRowMax;
    unsigned blocks = rowBlocks(p.rows, block);
    if (block)
      launchKernel(crossEntropyRows<T, L, true>, blocks, kRowThreads, 0,
                   context.stream, logits, labels, loss, perSample, p,
                   context.error, context.instruction);
    else
      launchKernel(crossEntropyRows<T, L, false>, blocks, kRowThreads, 0,
                   context.stream, logits, labels, loss, perSample, p,
                   context.error, context.instruction);
    if (Status s = launchStatus("cross_entropy"); !s)
      return s;
  }
  if (!reduce)
    return Status::ok();
  return launchLossTotal(context, perSample, labels, loss, p);
}

//===----------------------------------------------------------------------===//
// cross_entropy_backward
//===----------------------------------------------------------------------===//

/// Threads per block of the gradient kernel when it caches rows in shared
/// memory: two blocks fill half an SM's threads and most of its shared
/// memory with a GPT-2 row each (100 KB of bf16).
constexpr int kCachedRowThreads = 512;

/// Copies the row's first `n` entries to the block's dynamic shared memory
/// and returns the copy: 16 bytes per load where the row is 16-byte aligned,
/// four loads in flight per thread.
template <typename T>
__device__ const T *cacheRow(const T *row, int64_t n, int lane, int size) {
  T *cache = reinterpret_cast<T *>(dynamicShared());
  int64_t done = 0;
  if (reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    constexpr int64_t kPerChunk = 16 / sizeof(T);
    const int64_t chunks = n / kPerChunk;
    const uint4 *from = reinterpret_cast<const uint4 *>(row);
    uint4 *to = reinterpret_cast<uint4 *>(cache);
    int64_t i = lane;
    for (; i + 3 * size < chunks; i += 4 * size) {
      const uint4 a = from[i], b = from[i + size], c = from[i + 2 * size],
                  d = from[i + 3 * size];
      to[i] = a;
      to[i + size] = b;
      to[i + 2 * size] = c;
      to[i + 3 * size] = d;
    }
    for (; i < chunks; i += size)
      to[i] = from[i];
    done = chunks * kPerChunk;
  }
  for (int64_t i = done + lane; i < n; i += size)
    cache[i] = row[i];
  __syncthreads();
  return cache;
}

/// (softmax(row) - onehot(label)) * scale per row, the probabilities as the
/// softmax kernel computes them (e^(x - max) times 1/sum), rounded once to
/// O. Ignored samples get zeros, out-of-range labels NaN and an error; the
/// padding after the classes gets zeros.
///
/// `WithLoss` (cross_entropy with a gradient output) also stores each
/// sample's loss as crossEntropyRows does, from the same maximum and sum.
/// The gradient reads the row twice (for the sum, then for the
/// probabilities); a vocabulary-sized row is gone from L2 by the second
/// read when every SM streams its own, so `Cached` (block rows only)
/// copies the row to shared memory first and both passes read the copy.
template <typename T, typename L, typename O, bool Block, bool WithLoss,
          bool Cached>
__global__ void crossEntropyGradientRows(
    const T *logits, const L *labels, const LossOf<T> *scale,
    bool scalePerSample, O *dlogits, LossOf<T> *loss, double *perSample,
    CrossEntropyParams p, DeviceError *error, int32_t instruction) {
  static_assert(Block || !Cached, "only block rows are cached");
  using A = LossOf<T>;
  RowGroup<Block> g;
  if (g.row >= p.rows)
    return;
  const int64_t label = int64_t(labels[g.row]);
  O *out = dlogits + g.row * p.width;
  for (int64_t c = p.classes + g.lane; c < p.width; c += g.size)
    store(out + c, LossOf<T>(0));
  const LabelKind kind = classifyLabel(label, p, g, error, instruction);
  double sampleLoss;
  if (kind != LabelKind::Counted) {
    const A fill =
        kind == LabelKind::Ignored ? A(0) : std::numeric_limits<A>::quiet_NaN();
    for (int64_t c = g.lane; c < p.classes; c += g.size)
      store(out + c, fill);
    sampleLoss = kind == LabelKind::Ignored
                     ? 0
                     : std::numeric_limits<double>::quiet_NaN();
  } else {
    // `kind` is the same for the whole block: every thread reaches the
    // copy's barrier.
    const T *row = logits + g.row * p.width;
    if constexpr (Cached)
      row = cacheRow(row, p.classes, g.lane, g.size);
    A max;
    double sum;
    rowExpSum(row, p.classes, g, max, sum);
    const A inverse = A(1 / sum);
    const A factor = scale[scalePerSample ? g.row : 0];
    for (int64_t c = g.lane; c < p.classes; c += g.size) {
      A prob = expOf(widen(row[c]) - max) * inverse;
      store(out + c, (c == label ? prob - A(1) : prob) * factor);
    }
    sampleLoss = double(max) + log(sum) - double(widen(row[label]));
  }
  if (!WithLoss || g.lane != 0)
    return;
  if (p.reduction == CrossEntropyParams::Reduction::None)
    loss[g.row] = A(sampleLoss);
  else
    perSample[g.row] = sampleLoss;
}

/// How the gradient kernel runs: a warp or a block per row, and whether a
/// block caches its row (and how many bytes of shared memory that takes).
struct GradientShape {
  bool block = false, cached = false;
  size_t cacheBytes = 0;
};

/// Caches rows that leave room for two blocks per SM in the device's
/// shared memory (half the opt-in limit, less 2 KB for what each block
/// also holds: the 1 KB the hardware reserves and groupReduce's partial
/// sums), and lets the cached kernel use that much.
template <typename T, typename L, typename O, bool WithLoss>
StatusOr<GradientShape> chooseGradientShape(const CrossEntropyParams &p) {
  GradientShape shape;
  shape.block = p.classes > kWarpRowMax;
  if (!shape.block)
    return shape;
  int optIn = 0;
  if (Status s = sharedMemoryOptIn(optIn); !s)
    return s;
  const size_t bytes = (size_t(p.classes) * sizeof(T) + 15) / 16 * 16;
  const size_t limit = size_t(optIn) / 2 - 2048;
  if (bytes > limit)
    return shape;
  if (Status s = cudaStatus(
          cudaFuncSetAttribute(
              reinterpret_cast<const void *>(
                  &crossEntropyGradientRows<T, L, O, true, WithLoss, true>),
              cudaFuncAttributeMaxDynamicSharedMemorySize, int(limit)),
          "cudaFuncSetAttribute(crossEntropyGradientRows)");
      !s)
    return s;
  shape.cached = true;
  shape.cacheBytes = bytes;
  return shape;
}

/// The gradient (cross_entropy_backward), or with `WithLoss` the loss and
/// the gradient (cross_entropy with a gradient output; the per-sample
/// losses of a mean or sum go to the workspace and crossEntropyTotal adds
/// them).
template <typename T, typename L, typename O, bool WithLoss>
Status launchCrossEntropyGradient(const LaunchContext &context, const T *logits,
                                  const L *labels, const LossOf<T> *scale,
                                  bool scalePerSample, O *dlogits,
                                  LossOf<T> *loss, const CrossEntropyParams &p,
                                  const GradientShape &shape) {
  const bool reduce =
      WithLoss && p.reduction != CrossEntropyParams::Reduction::None;
  double *perSample = static_cast<double *>(context.workspace);
  if (Status s = checkLossWorkspace(context, p, reduce); !s)
    return s;
  const char *name = WithLoss ? "cross_entropy" : "cross_entropy_backward";
  if (p.rows * p.width > 0) {
    auto launch = [&](auto kernel, int threads, size_t shared) {
      launchKernel(kernel, rowBlocks(p.rows, shape.block), threads, shared,
                   context.stream, logits, labels, scale, scalePerSample,
                   dlogits, loss, perSample, p, context.error,
                   context.instruction);
    };
    if (shape.cached)
      launch(crossEntropyGradientRows<T, L, O, true, WithLoss, true>,
             kCachedRowThreads, shape.cacheBytes);
    else if (shape.block)
      launch(crossEntropyGradientRows<T, L, O, true, WithLoss, false>,
             kRowThreads, 0);
    else
      launch(crossEntropyGradientRows<T, L, O, false, WithLoss, false>,
             kRowThreads, 0);
    if (Status s = launchStatus(name); !s)
      return s;
  }
  if (!reduce)
    return Status::ok();
  return launchLossTotal(context, perSample, labels, loss, p);
}

/// The rows of the logits, ignore_index and classes from the instruction
/// (which the CPU check has validated).
CrossEntropyParams readCrossEntropyParams(const Instruction &inst) {
  const std::vector<int64_t> &shape = inst.inputs[0].shape;
  CrossEntropyParams p;
  p.width = shape.back();
  p.classes = intAttr(inst.attrs, "classes", p.width);
  p.rows = product(shape, 0, shape.size() - 1);
  p.hasIgnore = inst.attrs.count("ignore_index") != 0;
  p.ignoreIndex = intAttr(inst.attrs, "ignore_index");
  return p;
}

} // namespace

KernelOr cuda::createSoftmax(const LaunchContext &, const Instruction &inst) {
  const std::vector<int64_t> &shape = inst.inputs[0].shape;
  const size_t axis =
      size_t(resolveAxis(intAttr(inst.attrs, "axis", -1), shape.size()));
  const int64_t outer = product(shape, 0, axis), n = shape[axis],
                inner = product(shape, axis + 1, shape.size());
  const bool log = inst.kernel == "log_softmax";
  auto make = [&](auto tag, auto logTag) {
    using T = decltype(tag);
    constexpr bool Log = decltype(logTag)::value;
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      return launchSoftmax<T, Log>(
          context.stream, static_cast<const T *>(inputs[0]),
          static_cast<T *>(outputs[0]), outer, n, inner);
    });
  };
  if (inst.inputs[0].dtype == DType::F32)
    return log ? make(float(), std::true_type())
               : make(float(), std::false_type());
  if (inst.inputs[0].dtype == DType::F64)
    return log ? make(double(), std::true_type())
               : make(double(), std::false_type());
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(inst.inputs[0].dtype) + " " + inst.kernel);
}

KernelOr cuda::createLayerNorm(const LaunchContext &, const Instruction &inst) {
  const std::vector<int64_t> &shape = inst.inputs[0].shape;
  const size_t axis =
      size_t(resolveAxis(intAttr(inst.attrs, "axis", -1), shape.size()));
  const int64_t rows = product(shape, 0, axis),
                n = product(shape, axis, shape.size());
  const double epsilon = doubleAttr(inst.attrs, "epsilon", 1e-5);
  auto make = [&](auto tag, auto resultTag) {
    using T = decltype(tag);
    using O = decltype(resultTag);
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      if (rows * n == 0)
        return Status::ok();
      const T *x = static_cast<const T *>(inputs[0]);
      const T *scale = static_cast<const T *>(inputs[1]);
      const T *bias = static_cast<const T *>(inputs[2]);
      O *y = static_cast<O *>(outputs[0]);
      bool block = n > kWarpRowMax;
      unsigned blocks = rowBlocks(rows, block);
      if (block)
        launchKernel(layerNormRows<T, O, true>, blocks, kRowThreads, 0,
                     context.stream, x, scale, bias, y, rows, n, epsilon);
      else
        launchKernel(layerNormRows<T, O, false>, blocks, kRowThreads, 0,
                     context.stream, x, scale, bias, y, rows, n, epsilon);
      return launchStatus("layer_norm");
    });
  };
  // The result is the input's dtype, or bf16 for f32 (the CPU check allows
  // no other).
  if (inst.inputs[0].dtype == DType::F32)
    return inst.outputs[0].dtype == DType::BF16 ? make(float(), BF16())
                                                : make(float(), float());
  if (inst.inputs[0].dtype == DType::F64)
    return make(double(), double());
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(inst.inputs[0].dtype) + " layer_norm");
}

KernelOr cuda::createLayerNormBackward(const LaunchContext &context,
                                       const Instruction &inst) {
  const std::vector<int64_t> &shape = inst.inputs[0].shape;
  const size_t axis =
      size_t(resolveAxis(intAttr(inst.attrs, "axis", -1), shape.size()));
  LayerNormBackwardPlan p;
  p.rows = product(shape, 0, axis);
  p.n = product(shape, axis, shape.size());
  p.epsilon = doubleAttr(inst.attrs, "epsilon", 1e-5);
  // Enough row chunks for the column pass to fill the device (its grid is
  // only n / kThreads wide), as many as the workspace holds.
  const int64_t columnBlocks = (p.n + kThreads - 1) / kThreads;
  const int64_t target =
      kReductionBlocksPerSM * int64_t(std::max(context.multiprocessors, 64));
  const uint64_t chunkBytes = 2 * uint64_t(p.n) * sizeof(double);
  int64_t chunks = std::min<int64_t>(
      std::max<int64_t>(1, (target + columnBlocks - 1) / columnBlocks),
      std::min<int64_t>(std::max<int64_t>(p.rows, 1), 65535));
  if (p.statsBytes() + chunkBytes > context.workspaceBytes)
    return Status::error("layer_norm_backward over " + std::to_string(p.rows) +
                         " rows of " + std::to_string(p.n) +
                         " needs at least " +
                         std::to_string(p.statsBytes() + chunkBytes) +
                         " bytes of workspace, the executor has " +
                         std::to_string(context.workspaceBytes));
  chunks = std::min<int64_t>(
      chunks, int64_t((context.workspaceBytes - p.statsBytes()) / chunkBytes));
  p.rowsPerChunk = (p.rows + chunks - 1) / chunks;
  // Drop chunks that would be empty after rounding the chunk size up.
  p.chunks =
      p.rowsPerChunk ? (p.rows + p.rowsPerChunk - 1) / p.rowsPerChunk : 1;
  // The fused form (loom.fused_layer_norm_grad) has an addend as its fourth
  // input and a bf16 copy of dx as its fourth output.
  const bool hasAddend = inst.inputs.size() == 4;
  const bool hasNarrow = inst.outputs.size() == 4;
  auto make = [&](auto tag, auto doutTag) {
    using T = decltype(tag);
    using D = decltype(doutTag);
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      return launchLayerNormBackward<T, D>(
          context, p, static_cast<const T *>(inputs[0]),
          static_cast<const T *>(inputs[1]), static_cast<const D *>(inputs[2]),
          hasAddend ? static_cast<const T *>(inputs[3]) : nullptr,
          static_cast<T *>(outputs[0]), static_cast<T *>(outputs[1]),
          static_cast<T *>(outputs[2]),
          hasNarrow ? static_cast<BF16 *>(outputs[3]) : nullptr);
    });
  };
  // dout is the input's dtype, or bf16 for f32.
  if (inst.inputs[0].dtype == DType::F32)
    return inst.inputs[2].dtype == DType::BF16 ? make(float(), BF16())
                                               : make(float(), float());
  if (inst.inputs[0].dtype == DType::F64)
    return make(double(), double());
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(inst.inputs[0].dtype) +
                       " layer_norm_backward");
}

namespace {

/// The gradient kernel for an instruction whose gradient is output
/// `gradientOutput` (cross_entropy_backward's only output, the second of
/// cross_entropy with a gradient; `WithLoss` then). The gradient is the
/// loss type or the next narrower one (the CPU check allows no other): f32
/// or bf16 for f32/bf16 logits, f64 or f32 for f64.
template <bool WithLoss>
KernelOr createCrossEntropyGradient(const Instruction &inst,
                                    const CrossEntropyParams &p) {
  const bool scalePerSample = !inst.inputs[2].shape.empty();
  const size_t gradientOutput = WithLoss ? 1 : 0;
  const bool narrowResult =
      inst.outputs[gradientOutput].dtype !=
      (inst.inputs[0].dtype == DType::F64 ? DType::F64 : DType::F32);
  auto make = [&](auto tag, auto labelTag) -> KernelOr {
    using T = decltype(tag);
    using L = decltype(labelTag);
    using A = LossOf<T>;
    using Narrower = std::conditional_t<std::is_same_v<A, double>, float, BF16>;
    auto withResult = [&](auto resultTag) -> KernelOr {
      using O = decltype(resultTag);
      StatusOr<GradientShape> shape = chooseGradientShape<T, L, O, WithLoss>(p);
      if (!shape.isOk())
        return shape.status();
      return makeKernel([=, shape = *shape](const LaunchContext &context,
                                            const void *const *inputs,
                                            void *const *outputs) {
        return launchCrossEntropyGradient<T, L, O, WithLoss>(
            context, static_cast<const T *>(inputs[0]),
            static_cast<const L *>(inputs[1]),
            static_cast<const A *>(inputs[2]), scalePerSample,
            static_cast<O *>(outputs[gradientOutput]),
            WithLoss ? static_cast<A *>(outputs[0]) : nullptr, p, shape);
      });
    };
    return narrowResult ? withResult(Narrower()) : withResult(A());
  };
  return dispatchFloatAndIndex</*WithBF16=*/true>(
      inst.inputs[0].dtype, inst.inputs[1].dtype, make,
      WithLoss ? "cross_entropy" : "cross_entropy_backward");
}

} // namespace

KernelOr cuda::createCrossEntropy(const LaunchContext &context,
                                  const Instruction &inst) {
  CrossEntropyParams p = readCrossEntropyParams(inst);
  std::string reduction = wordAttr(inst.attrs, "reduction", "mean");
  p.reduction = reduction == "none"  ? CrossEntropyParams::Reduction::None
                : reduction == "sum" ? CrossEntropyParams::Reduction::Sum
                                     : CrossEntropyParams::Reduction::Mean;
  if (p.reduction != CrossEntropyParams::Reduction::None &&
      context.workspaceBytes < uint64_t(p.rows) * 8)
    return Status::error("cross_entropy over " + std::to_string(p.rows) +
                         " samples needs " + std::to_string(p.rows * 8) +
                         " bytes of workspace, the executor has " +
                         std::to_string(context.workspaceBytes));
  // With the gradient's scale as a third input, the gradient is a second
  // output, computed from the same read of each row.
  if (inst.inputs.size() == 3)
    return createCrossEntropyGradient</*WithLoss=*/true>(inst, p);
  auto make = [&](auto tag, auto labelTag) {
    using T = decltype(tag);
    using L = decltype(labelTag);
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      return launchCrossEntropy<T, L>(context,
                                      static_cast<const T *>(inputs[0]),
                                      static_cast<const L *>(inputs[1]),
                                      static_cast<LossOf<T> *>(outputs[0]), p);
    });
  };
  return dispatchFloatAndIndex</*WithBF16=*/true>(
      inst.inputs[0].dtype, inst.inputs[1].dtype, make, "cross_entropy");
}

KernelOr cuda::createCrossEntropyBackward(const LaunchContext &,
                                          const Instruction &inst) {
  CrossEntropyParams p = readCrossEntropyParams(inst);
  p.reduction = CrossEntropyParams::Reduction::None;
  return createCrossEntropyGradient</*WithLoss=*/false>(inst, p);
}
