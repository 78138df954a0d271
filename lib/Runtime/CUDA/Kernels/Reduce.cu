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
// Every reduction combines partial results in a fixed order, so results are
// the same from run to run.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <limits>
#include <type_traits>

using namespace loom::runtime;
using namespace loom::runtime::cuda;

namespace {

enum class Kind { Sum, Mean, Max };

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
  __device__ static A load(T x) {
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
template <typename T, Kind K, bool Block>
__global__ void rowReduce(const T *x, T *y, int64_t rows, int64_t n,
                          typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  typename R::Op op;
  RowGroup<Block> g;
  if (g.row >= rows)
    return; // a whole warp (warp mode only: a block's row always exists)
  const T *in = x + g.row * n;
  typename R::A acc = identity;
  for (int64_t i = g.lane; i < n; i += g.size)
    acc = op(acc, R::load(in[i]));
  acc = groupReduce<Block>(acc, op);
  if (g.lane == 0)
    y[g.row] = R::finish(acc, n);
}

constexpr int kColumns = 32, kSplit = 8;

/// Middle reduction: y[o, j] reduces x[o, r, j] over r. Block (32, 8):
/// x-threads take consecutive columns, y-threads split r.
template <typename T, Kind K>
__global__ void middleReduce(const T *x, T *y, int64_t outer, int64_t red,
                             int64_t inner,
                             typename Reducer<T, K>::A identity) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  typename R::Op op;
  __shared__ A partial[kSplit][kColumns + 1];
  const int64_t j = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    A acc = identity;
    if (j < inner) {
      const T *in = x + o * red * inner + j;
      for (int64_t r = threadIdx.y; r < red; r += kSplit)
        acc = op(acc, R::load(in[r * inner]));
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < inner) {
      for (int s = 1; s < kSplit; ++s)
        acc = op(acc, partial[s][threadIdx.x]);
      y[o * inner + j] = R::finish(acc, red);
    }
    __syncthreads(); // `partial` is reused by the next o
  }
}

/// Any pattern: a warp per output; `kept` gives the outputs' dims with their
/// strides in x, `reduced` the reduced dims with theirs.
template <typename T, Kind K>
__global__ void generalReduce(const T *x, T *y, int64_t outputs, Dims kept,
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
};

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

template <typename T, Kind K>
Status launchTyped(const ReducePlan &plan, cudaStream_t stream, const T *x,
                   T *y) {
  using R = Reducer<T, K>;
  const auto identity = R::identity();
  switch (plan.shape) {
  case ReducePlan::Shape::Copy:
    if (x == y || plan.bytes == 0)
      return Status::ok();
    return cudaStatus(
        cudaMemcpyAsync(y, x, plan.bytes, cudaMemcpyDeviceToDevice, stream),
        "reduction copy");
  case ReducePlan::Shape::Rows: {
    if (plan.outer == 0)
      return Status::ok();
    bool block = plan.red > kWarpRowMax;
    unsigned blocks = rowBlocks(plan.outer, block);
    if (block)
      rowReduce<T, K, true><<<blocks, kRowThreads, 0, stream>>>(
          x, y, plan.outer, plan.red, identity);
    else
      rowReduce<T, K, false><<<blocks, kRowThreads, 0, stream>>>(
          x, y, plan.outer, plan.red, identity);
    return launchStatus("row reduction");
  }
  case ReducePlan::Shape::Middle: {
    if (plan.outer == 0 || plan.inner == 0)
      return Status::ok();
    dim3 grid(unsigned((plan.inner + kColumns - 1) / kColumns),
              unsigned(std::min<int64_t>(plan.outer, 65535)));
    middleReduce<T, K><<<grid, dim3(kColumns, kSplit), 0, stream>>>(
        x, y, plan.outer, plan.red, plan.inner, identity);
    return launchStatus("middle reduction");
  }
  case ReducePlan::Shape::General:
    if (plan.outputs == 0)
      return Status::ok();
    generalReduce<T, K>
        <<<rowBlocks(plan.outputs, false), kRowThreads, 0, stream>>>(
            x, y, plan.outputs, plan.kept, plan.reduced, plan.count, identity);
    return launchStatus("reduction");
  }
  return Status::ok();
}

template <Kind K> KernelOr createTyped(const ReducePlan &plan, DType dtype) {
  auto launch = [plan](auto tag) {
    using T = decltype(tag);
    return makeKernel([plan](const LaunchContext &context,
                             const void *const *inputs, void *const *outputs) {
      return launchTyped<T, K>(plan, context.stream,
                               static_cast<const T *>(inputs[0]),
                               static_cast<T *>(outputs[0]));
    });
  };
  switch (dtype) {
  case DType::F32:
    return launch(float());
  case DType::F64:
    return launch(double());
  case DType::I32:
    if constexpr (K != Kind::Mean)
      return launch(int32_t());
    break;
  case DType::I64:
    if constexpr (K != Kind::Mean)
      return launch(int64_t());
    break;
  default:
    break;
  }
  return Status::error(std::string("the CUDA backend has no ") +
                       dtypeName(dtype) + " reduction");
}

} // namespace

KernelOr cuda::createReduce(const LaunchContext &, const Instruction &inst) {
  ReducePlan plan;
  if (Status s = planReduction(inst, plan); !s)
    return s;
  DType dtype = inst.inputs[0].dtype;
  if (inst.kernel == "reduce_sum")
    return createTyped<Kind::Sum>(plan, dtype);
  if (inst.kernel == "reduce_mean")
    return createTyped<Kind::Mean>(plan, dtype);
  return createTyped<Kind::Max>(plan, dtype);
}
