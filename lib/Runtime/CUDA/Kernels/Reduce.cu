//===- Reduce.cu - The CUDA reduction kernels -----------------------------===//
//
// reduce_sum, reduce_mean and reduce_max, with the CPU kernels' semantics:
// f32 sums accumulate in double, integer sums wrap (two's complement, done on
// unsigned 64-bit accumulators), reduce_max propagates NaN, and an empty
// reduction gives 0 (sum), NaN (mean) or the lowest value (max).
//
// As on the CPU, size-1 dims are dropped and neighbouring dims that are both
// reduced or both kept are merged. Then:
//  - nothing reduced: a copy;
//  - trailing axes (each output a contiguous row): a warp per row, or a
//    block per row for rows longer than kWarpRowMax;
//  - one middle block (outer x reduced x inner): 32 columns per block, eight
//    threads per column splitting the reduced rows, so that loads coalesce
//    along the inner dim;
//  - anything else: a warp per output decoding the reduced positions.
// When the first two leave most of the device idle (a bias gradient: 768
// columns over 8192 rows gives 24 blocks), the reduced range is cut into
// chunks (reductionChunks): each block reduces one chunk of its outputs into
// the workspace, and a second kernel combines each output's chunks in
// order.
// Every reduction combines partial results in a fixed order, so results are
// the same from run to run. reduce_sum also reads bf16 (I) into an f32
// result (T): loads widen exactly, so the result is the f32 input's.
//
//===----------------------------------------------------------------------===//

#include "CumsumLine.h"
#include "Device.cuh"

#include <limits>
#include <type_traits>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

enum class Kind { Sum, Mean, Max };

/// `in` as a T: bf16 widens to f32 exactly; other types are T already.
template <typename T, typename I> __device__ inline T asValue(I in) {
  if constexpr (std::is_same_v<I, BF16>)
    return T(widen(in));
  else
    return in;
}

template <typename T, Kind K> struct Reducer {
  static constexpr bool isFloat = std::is_floating_point_v<T>;
  using A = std::conditional_t<K == Kind::Max, T,
                               std::conditional_t<isFloat, double, uint64_t>>;
  using Op = std::conditional_t<K == Kind::Max, MaxNaNOp, SumOp>;

  static A identity() {
    if constexpr (K != Kind::Max)
      return A(0);
    else if constexpr (isFloat)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  /// An input element (of T, or bf16 for an f32 T) as an accumulator.
  template <typename I> __device__ static A load(I in) {
    T x = asValue<T>(in);
    if constexpr (K == Kind::Max || isFloat)
      return A(x);
    else
      return A(int64_t(x)); // sign-extended, then added modulo 2^64
  }
  __device__ static T finish(A acc, int64_t count) {
    if constexpr (K == Kind::Mean)
      return T(acc / double(count)); // 0/0 = NaN for an empty mean
    else if constexpr (K == Kind::Max || isFloat)
      return T(acc);
    else
      return T(acc); // truncated to T's width: the wrapped sum
  }
};

/// Trailing reduction: output `row` reduces x[row * n, (row + 1) * n).
template <typename T, Kind K, bool Block, typename I>
__global__ void rowReduce(const I *x, T *y, int64_t rows, int64_t n,
                          typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  typename R::Op op;
  RowGroup<Block> g;
  if (g.row >= rows)
    return; // a whole warp (warp mode only: a block's row always exists)
  const I *in = x + g.row * n;
  typename R::A acc = identity;
  for (int64_t i = g.lane; i < n; i += g.size)
    acc = op(acc, R::load(in[i]));
  acc = groupReduce<Block>(acc, op);
  if (g.lane == 0)
    y[g.row] = R::finish(acc, n);
}

/// One chunk of each long row: block (s, row) reduces
/// x[row * n + s * chunk, row * n + min(n, (s + 1) * chunk)) into
/// partial[s * rows + row].
template <typename T, Kind K, typename I>
__global__ void rowChunkReduce(const I *x, typename Reducer<T, K>::A *partial,
                               int64_t rows, int64_t n, int64_t chunk,
                               typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  typename R::Op op;
  const int64_t row = blockIdx.y, begin = int64_t(blockIdx.x) * chunk;
  const int64_t end = std::min(n, begin + chunk);
  const I *in = x + row * n;
  typename R::A acc = identity;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    acc = op(acc, R::load(in[i]));
  acc = groupReduce<true>(acc, op);
  if (threadIdx.x == 0)
    partial[int64_t(blockIdx.x) * rows + row] = acc;
}

constexpr int kColumns = 32, kSplit = 8;

/// Middle reduction: y[o, j] reduces x[o, r, j] over r. Block (32, 8):
/// x-threads take consecutive columns, y-threads split r. Block z takes the
/// rows [z * chunk, (z + 1) * chunk) of r: with one chunk it finishes into
/// `y` (T), with several it leaves its accumulator in
/// `y` (A: [chunks][outer][inner]) for combineChunks.
template <typename T, Kind K, bool Chunked, typename I>
__global__ void middleReduce(const I *x, void *y, int64_t outer, int64_t red,
                             int64_t inner, int64_t chunk,
                             typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  typename R::Op op;
  __shared__ A partial[kSplit][kColumns + 1];
  const int64_t j = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.z) * chunk;
  const int64_t end = std::min(red, begin + chunk);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    A acc = identity;
    if (j < inner) {
      const I *in = x + o * red * inner + j;
      for (int64_t r = begin + threadIdx.y; r < end; r += kSplit)
        acc = op(acc, R::load(in[r * inner]));
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < inner) {
      for (int s = 1; s < kSplit; ++s)
        acc = op(acc, partial[s][threadIdx.x]);
      if constexpr (Chunked)
        static_cast<A *>(y)[(int64_t(blockIdx.z) * outer + o) * inner + j] =
            acc;
      else
        static_cast<T *>(y)[o * inner + j] = R::finish(acc, red);
    }
    __syncthreads(); // `partial` is reused by the next o
  }
}

/// y[i] combines partial[s * outputs + i] over the chunks s, in order.
template <typename T, Kind K>
__global__ void combineChunks(const typename Reducer<T, K>::A *partial, T *y,
                              int64_t outputs, int64_t chunks, int64_t count,
                              typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  typename R::Op op;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += int64_t(gridDim.x) * blockDim.x) {
    typename R::A acc = identity;
    for (int64_t s = 0; s < chunks; ++s)
      acc = op(acc, partial[s * outputs + i]);
    y[i] = R::finish(acc, count);
  }
}

/// Any pattern: a warp per output; `kept` gives the outputs' dims with their
/// strides in x, `reduced` the reduced dims with theirs.
template <typename T, Kind K, typename I>
__global__ void generalReduce(const I *x, T *y, int64_t outputs, Dims kept,
                              Dims reduced, int64_t count,
                              typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  typename R::Op op;
  RowGroup<false> g;
  if (g.row >= outputs)
    return;
  const int64_t base = stridedOffset(kept, g.row);
  typename R::A acc = identity;
  for (int64_t i = g.lane; i < count; i += 32)
    acc = op(acc, R::load(x[base + stridedOffset(reduced, i)]));
  acc = groupReduce<false>(acc, op);
  if (g.lane == 0)
    y[g.row] = R::finish(acc, count);
}

/// The reduction after merging dims.
struct ReducePlan {
  enum class Shape { Copy, Rows, Middle, General } shape = Shape::Copy;
  int64_t outer = 1, red = 1, inner = 1;
  Dims kept, reduced;
  int64_t outputs = 0, count = 0;
  uint64_t bytes = 0; // Copy
  /// Rows and Middle: the reduced range in `chunks` chunks of `chunk`
  /// elements (the last may be shorter); one chunk of `red` when unchunked.
  int64_t chunks = 1, chunk = 0;
};

/// Cuts Rows and Middle reductions that would leave the device mostly idle
/// into chunks, the partial results of which (accumulators of `accBytes`)
/// fit the workspace.
void chooseChunks(ReducePlan &plan, const LaunchContext &context,
                  uint64_t accBytes) {
  plan.chunks = 1;
  plan.chunk = plan.red;
  int64_t blocks = 0, minChunk = 0;
  if (plan.shape == ReducePlan::Shape::Rows && plan.red > kWarpRowMax) {
    blocks = rowBlocks(plan.outer, true);
    minChunk = 8 * kRowThreads; // eight loads per thread at least
  } else if (plan.shape == ReducePlan::Shape::Middle) {
    blocks = (plan.inner + kColumns - 1) / kColumns *
             std::min<int64_t>(plan.outer, 65535);
    minChunk = 8 * kSplit;
  } else {
    return; // warp rows fill the device by their number
  }
  int64_t chunks = reductionChunks(
      blocks, plan.red, minChunk, accBytes * uint64_t(plan.outer * plan.inner),
      context.multiprocessors, context.workspaceBytes);
  if (chunks < 2)
    return;
  plan.chunk = (plan.red + chunks - 1) / chunks;
  plan.chunks = (plan.red + plan.chunk - 1) / plan.chunk; // none empty
}

Status planReduction(const Instruction &instruction, ReducePlan &plan) {
  const TensorRef &x = instruction.inputs[0];
  const size_t rank = x.shape.size();
  std::vector<bool> isReduced(rank, false);
  for (int64_t axis : intListAttr(instruction.attrs, "axes"))
    isReduced[size_t(resolveAxis(axis, rank))] = true;
  std::vector<int64_t> sizes;
  std::vector<bool> reducedGroup;
  for (size_t d = 0; d < rank; ++d) {
    if (x.shape[d] == 1)
      continue;
    if (!sizes.empty() && reducedGroup.back() == isReduced[d]) {
      sizes.back() *= x.shape[d];
      continue;
    }
    sizes.push_back(x.shape[d]);
    reducedGroup.push_back(isReduced[d]);
  }
  const size_t n = sizes.size();
  int reducedGroups = 0;
  size_t at = 0;
  for (size_t g = 0; g < n; ++g)
    if (reducedGroup[g]) {
      ++reducedGroups;
      at = g;
    }
  plan.outputs = instruction.outputs[0].elements();
  if (reducedGroups == 0) {
    plan.shape = ReducePlan::Shape::Copy;
    plan.bytes = x.bytes();
    return Status::ok();
  }
  if (reducedGroups == 1) {
    plan.outer = product(sizes, 0, at);
    plan.red = sizes[at];
    plan.inner = product(sizes, at + 1, n);
    plan.shape =
        plan.inner == 1 ? ReducePlan::Shape::Rows : ReducePlan::Shape::Middle;
    return Status::ok();
  }
  plan.shape = ReducePlan::Shape::General;
  if (Status s = expectDimsAtMost(n, "a reduction"); !s)
    return s;
  int64_t stride = 1;
  std::vector<int64_t> strides(n);
  for (size_t g = n; g-- > 0;) {
    strides[g] = stride;
    stride *= sizes[g];
  }
  for (size_t g = 0; g < n; ++g) {
    Dims &dims = reducedGroup[g] ? plan.reduced : plan.kept;
    dims.size[dims.rank] = sizes[g];
    dims.stride[dims.rank] = strides[g];
    ++dims.rank;
  }
  plan.count = 1;
  for (int d = 0; d < plan.reduced.rank; ++d)
    plan.count *= plan.reduced.size[d];
  return Status::ok();
}

template <typename T, Kind K, typename I>
Status launchTyped(const ReducePlan &plan, const LaunchContext &context,
                   const I *x, T *y) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  const A identity = R::identity();
  cudaStream_t stream = context.stream;
  A *partial = static_cast<A *>(context.workspace);
  if (plan.chunks > 1 && context.workspaceBytes < uint64_t(plan.chunks) *
                                                      plan.outer * plan.inner *
                                                      sizeof(A))
    return Status::error("a chunked reduction needs " +
                         std::to_string(plan.chunks * plan.outer * plan.inner *
                                        int64_t(sizeof(A))) +
                         " bytes of workspace, the launch has " +
                         std::to_string(context.workspaceBytes));
  // The second pass of a chunked reduction: each output's chunks in order.
  auto combine = [&](int64_t outputs) {
    launchKernel(combineChunks<T, K>, gridFor(outputs), kThreads, 0, stream,
                 partial, y, outputs, plan.chunks, plan.red, identity);
    return launchStatus("combining a reduction's chunks");
  };
  switch (plan.shape) {
  case ReducePlan::Shape::Copy:
    if constexpr (!std::is_same_v<I, T>) {
      // Nothing reduced, but bf16 -> f32: each output a row of one.
      if (plan.outputs == 0)
        return Status::ok();
      launchKernel(rowReduce<T, K, false, I>, rowBlocks(plan.outputs, false),
                   kRowThreads, 0, stream, x, y, plan.outputs, 1, identity);
      return launchStatus("widening reduction");
    }
    if (static_cast<const void *>(x) == y || plan.bytes == 0)
      return Status::ok();
    return cudaStatus(
        cudaMemcpyAsync(y, x, plan.bytes, cudaMemcpyDeviceToDevice, stream),
        "reduction copy");
  case ReducePlan::Shape::Rows: {
    if (plan.outer == 0)
      return Status::ok();
    if (plan.chunks > 1) {
      dim3 grid(unsigned(plan.chunks), unsigned(plan.outer));
      launchKernel(rowChunkReduce<T, K, I>, grid, kRowThreads, 0, stream, x,
                   partial, plan.outer, plan.red, plan.chunk, identity);
      if (Status s = launchStatus("row reduction"); !s)
        return s;
      return combine(plan.outer);
    }
    bool block = plan.red > kWarpRowMax;
    unsigned blocks = rowBlocks(plan.outer, block);
    if (block)
      launchKernel(rowReduce<T, K, true, I>, blocks, kRowThreads, 0, stream, x,
                   y, plan.outer, plan.red, identity);
    else
      launchKernel(rowReduce<T, K, false, I>, blocks, kRowThreads, 0, stream, x,
                   y, plan.outer, plan.red, identity);
    return launchStatus("row reduction");
  }
  case ReducePlan::Shape::Middle: {
    if (plan.outer == 0 || plan.inner == 0)
      return Status::ok();
    dim3 grid(unsigned((plan.inner + kColumns - 1) / kColumns),
              unsigned(std::min<int64_t>(plan.outer, 65535)),
              unsigned(plan.chunks));
    dim3 block(kColumns, kSplit);
    if (plan.chunks == 1) {
      launchKernel(middleReduce<T, K, false, I>, grid, block, 0, stream, x, y,
                   plan.outer, plan.red, plan.inner, plan.chunk, identity);
      return launchStatus("middle reduction");
    }
    launchKernel(middleReduce<T, K, true, I>, grid, block, 0, stream, x,
                 partial, plan.outer, plan.red, plan.inner, plan.chunk,
                 identity);
    if (Status s = launchStatus("middle reduction"); !s)
      return s;
    return combine(plan.outer * plan.inner);
  }
  case ReducePlan::Shape::General:
    if (plan.outputs == 0)
      return Status::ok();
    launchKernel(generalReduce<T, K, I>, rowBlocks(plan.outputs, false),
                 kRowThreads, 0, stream, x, y, plan.outputs, plan.kept,
                 plan.reduced, plan.count, identity);
    return launchStatus("reduction");
  }
  return Status::ok();
}

template <Kind K>
KernelOr createTyped(ReducePlan plan, const LaunchContext &context,
                     DType dtype) {
  auto launch = [plan, &context](auto tag, auto inputTag) mutable {
    using T = decltype(tag);
    using I = decltype(inputTag);
    chooseChunks(plan, context, sizeof(typename Reducer<T, K>::A));
    return makeKernel([plan](const LaunchContext &context,
                             const void *const *inputs, void *const *outputs) {
      return launchTyped<T, K, I>(plan, context,
                                  static_cast<const I *>(inputs[0]),
                                  static_cast<T *>(outputs[0]));
    });
  };
  switch (dtype) {
  case DType::F32:
    return launch(float(), float());
  case DType::F64:
    return launch(double(), double());
  case DType::BF16: // an f32 sum (the CPU check allows no other)
    if constexpr (K == Kind::Sum)
      return launch(float(), BF16());
    break;
  case DType::I32:
    if constexpr (K != Kind::Mean)
      return launch(int32_t(), int32_t());
    break;
  case DType::I64:
    if constexpr (K != Kind::Mean)
      return launch(int64_t(), int64_t());
    break;
  default:
    break;
  }
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(dtype) + " reduction");
}

} // namespace

int64_t cuda::reductionChunks(int64_t blocks, int64_t count, int64_t minChunk,
                              uint64_t bytesPerChunk, int multiprocessors,
                              uint64_t workspaceBytes) {
  const int64_t target = kReductionBlocksPerSM * int64_t(multiprocessors);
  // At half the target or more the launch is left alone: chunking costs a
  // second pass over the partial results.
  if (blocks <= 0 || 2 * blocks > target || minChunk <= 0)
    return 1;
  int64_t chunks = std::min((target + blocks - 1) / blocks, count / minChunk);
  if (bytesPerChunk > 0)
    chunks = std::min<int64_t>(chunks, int64_t(workspaceBytes / bytesPerChunk));
  chunks = std::min<int64_t>(chunks, 65535); // a grid dim
  return chunks < 2 ? 1 : chunks;
}

KernelOr cuda::createReduce(const LaunchContext &context,
                            const Instruction &inst) {
  ReducePlan plan;
  if (Status s = planReduction(inst, plan); !s)
    return s;
  DType dtype = inst.inputs[0].dtype;
  if (inst.kernel == "reduce_sum")
    return createTyped<Kind::Sum>(plan, context, dtype);
  if (inst.kernel == "reduce_mean")
    return createTyped<Kind::Mean>(plan, context, dtype);
  return createTyped<Kind::Max>(plan, context, dtype);
}

//===----------------------------------------------------------------------===//
// cumsum
//===----------------------------------------------------------------------===//

namespace {

/// One thread per line along the axis (outer x inner of them; neighbouring
/// threads read neighbouring elements when inner > 1), each CumsumLine.h's
/// scan, which the CPU kernel runs too: both give the same bits.
template <typename T>
__global__ void cumsumKernel(const T *x, T *y, int64_t outer, int64_t n,
                             int64_t inner, bool exclusive, bool reverse) {
  const int64_t lines = outer * inner;
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       line < lines; line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t start = (line / inner) * n * inner + line % inner;
    cumsumLine(x + start, y + start, n, inner, exclusive, reverse);
  }
}

} // namespace

KernelOr cuda::createCumsum(const LaunchContext &, const Instruction &inst) {
  const TensorRef &x = inst.inputs[0];
  const int64_t rank = int64_t(x.shape.size());
  int64_t axis = intAttr(inst.attrs, "axis", 0);
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d < axis)
      outer *= x.shape[size_t(d)];
    else if (d > axis)
      inner *= x.shape[size_t(d)];
  const int64_t n = x.shape[size_t(axis)];
  const bool exclusive = intAttr(inst.attrs, "exclusive", 0) != 0;
  const bool reverse = intAttr(inst.attrs, "reverse", 0) != 0;
  auto make = [&](auto tag) -> KernelOr {
    using T = decltype(tag);
    return makeKernel([=](const LaunchContext &context,
                          const void *const *inputs, void *const *outputs) {
      if (outer * inner * n == 0)
        return Status::ok();
      launchKernel(cumsumKernel<T>, gridFor(outer * inner), kThreads, 0,
                   context.stream, static_cast<const T *>(inputs[0]),
                   static_cast<T *>(outputs[0]), outer, n, inner, exclusive,
                   reverse);
      return launchStatus("cumsum");
    });
  };
  switch (x.dtype) {
  case DType::F32:
    return make(float());
  case DType::F64:
    return make(double());
  case DType::I32:
    return make(int32_t());
  case DType::I64:
    return make(int64_t());
  default:
    return Status::error(std::string("the CUDA backend has no ") +
                         dtypeName(x.dtype) + " cumsum");
  }
}
