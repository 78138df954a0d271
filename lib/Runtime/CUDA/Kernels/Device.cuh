//===- Device.cuh - Device helpers of the nvcc-compiled kernels -*- CUDA
//-*-===//
//
// Warp and block reductions, the error record, launch geometry and the
// dims-by-value struct the strided kernels decode indices with. Only
// included by .cu files.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_DEVICE_CUH
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_DEVICE_CUH

#include "Common.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#ifdef LOOM_CUDA_EMULATOR
#include "CUDAEmulator/Device.h"
#endif

#include <algorithm>
#include <cstdint>

namespace loomrt {
namespace cuda {

/// Records an error in `error` unless one is there already (the first error
/// of the step wins; later ones, from this kernel or others, are dropped).
__device__ inline void recordError(DeviceError *error, int32_t code,
                                   int32_t instruction, int64_t value,
                                   int64_t position, int64_t bound) {
  if (!error)
    return;
  // A plain read first: when many elements fail, most threads stop here
  // without an atomic.
  if (*reinterpret_cast<volatile int32_t *>(&error->code) != 0)
    return;
  if (atomicCAS(reinterpret_cast<int *>(&error->code), 0, int(code)) != 0)
    return;
  error->instruction = instruction;
  error->value = value;
  error->position = position;
  error->bound = bound;
}

//===----------------------------------------------------------------------===//
// Element access and math
//===----------------------------------------------------------------------===//

using BF16 = __nv_bfloat16;

/// Values as the kernels compute with them: f32 and bf16 in f32, f64 in f64
/// (bf16 widens exactly: it is the upper half of an f32).
__device__ inline float widen(float x) { return x; }
__device__ inline double widen(double x) { return x; }
__device__ inline float widen(BF16 x) { return __bfloat162float(x); }

/// Rounds to nearest even as the CPU does (BFloat16.h); NaN stays a quiet
/// NaN with its sign.
__device__ inline BF16 roundBF16(float v) {
  uint32_t bits = __float_as_uint(v);
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t nan = (bits >> 16) | 0x0040u;
  return __ushort_as_bfloat16(
      (unsigned short)((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded));
}

/// Stores a computed value, rounded once to the destination's type.
__device__ inline void store(float *p, float v) { *p = v; }
__device__ inline void store(double *p, double v) { *p = v; }
__device__ inline void store(float *p, double v) { *p = float(v); }
__device__ inline void store(BF16 *p, float v) { *p = roundBF16(v); }

__device__ inline float expOf(float x) { return expf(x); }
__device__ inline double expOf(double x) { return exp(x); }
__device__ inline float logOf(float x) { return logf(x); }
__device__ inline double logOf(double x) { return log(x); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

struct SumOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

/// Wrapping integer sums are done on unsigned 64-bit accumulators, so plain
/// addition is already the two's complement wraparound.
/// NaN-propagating max (reduce_max): a NaN operand wins.
struct MaxNaNOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return (a != a || a > b) ? a : b;
  }
};

/// Max that ignores NaN operands, as the CPU's softmax and cross_entropy
/// row maxima do (`x > max ? x : max`); a NaN in the row still makes the
/// sum of exponentials NaN afterwards.
struct MaxIgnoreNaNOp {
  template <typename A> __device__ A operator()(A a, A b) const {
    return b > a ? b : a;
  }
};

/// Butterfly reduction over a warp: every lane ends with the same value
/// (addition is commutative, so each lane's operands pair up identically).
template <typename A, typename Op> __device__ A warpReduce(A value, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// Reduction over a group of threads that handles one row: a warp
/// (`Block` false) or the whole block. Every thread of the group must call
/// it; every thread gets the result. The block version combines the warps'
/// results in warp order, so the result is deterministic.
template <bool Block, typename A, typename Op>
__device__ A groupReduce(A value, Op op) {
  value = warpReduce(value, op);
  if constexpr (!Block) {
    return value;
  } else {
    __shared__ A partial[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // an earlier call may still read `partial`
    if (lane == 0)
      partial[warp] = value;
    __syncthreads();
    A result = partial[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w)
      result = op(result, partial[w]);
    return result;
  }
}

/// Rows handled by one group (warp or block) each: the first thread of this
/// thread's group, its index in the group, the group size and the row.
template <bool Block> struct RowGroup {
  int64_t row;
  int lane;
  int size;
  __device__ RowGroup() {
    if constexpr (Block) {
      row = blockIdx.x;
      lane = threadIdx.x;
      size = blockDim.x;
    } else {
      row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
      lane = threadIdx.x % 32;
      size = 32;
    }
  }
};

/// Threads per block of the row kernels, and the row length above which a
/// row gets a whole block instead of a warp.
constexpr int kRowThreads = 256;
constexpr int64_t kWarpRowMax = 1024;

/// Blocks for `rows` rows with kRowThreads threads: one row per block or one
/// per warp.
inline unsigned rowBlocks(int64_t rows, bool blockPerRow) {
  return unsigned(
      blockPerRow ? rows : (rows + kRowThreads / 32 - 1) / (kRowThreads / 32));
}

//===----------------------------------------------------------------------===//
// Launch geometry
//===----------------------------------------------------------------------===//

constexpr int kThreads = 256;

/// Blocks of kThreads for a grid-stride loop over `n` items; capped so that
/// the loop's index increments never overflow (the loops stride by the grid).
inline unsigned gridFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(blocks, 1 << 16)));
}

/// The grid-stride loop index type: 32-bit when every index fits.
template <bool Wide> using Index = std::conditional_t<Wide, int64_t, int32_t>;

inline bool needsWide(int64_t n) { return n >= (int64_t(1) << 31) - (1 << 25); }

/// Dims passed by value: sizes (outermost first) and, per dim, a stride of
/// one or two tensors.
struct Dims {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

/// Offset of linear index `i` (over `dims.size`, row-major) along
/// `dims.stride`.
template <typename I> __device__ inline I stridedOffset(const Dims &dims, I i) {
  I offset = 0;
  for (int d = dims.rank - 1; d >= 0; --d) {
    I size = I(dims.size[d]);
    offset += (i % size) * I(dims.stride[d]);
    i /= size;
  }
  return offset;
}

/// Calls `make(T(), L())` with T the float type of `values` (f32, f64, and
/// bf16 when `WithBF16`) and L the integer type of `indices` (i32, i64):
/// the kernels that take float data and integer indices or labels
/// (scatter_add, cross_entropy).
template <bool WithBF16 = false, typename Make>
KernelOr dispatchFloatAndIndex(DType values, DType indices, Make make,
                               const char *kernel) {
  const bool i32 = indices == DType::I32;
  switch (values) {
  case DType::F32:
    return i32 ? make(float(), int32_t()) : make(float(), int64_t());
  case DType::F64:
    return i32 ? make(double(), int32_t()) : make(double(), int64_t());
  case DType::BF16:
    if constexpr (WithBF16)
      return i32 ? make(BF16(), int32_t()) : make(BF16(), int64_t());
    [[fallthrough]];
  default:
    return Status::error(std::string("the CUDA backend has no ") +
                         dtypeName(values) + " " + kernel);
  }
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

/// Launches `kernel` with `grid` blocks of `block` threads and `shared` bytes
/// of dynamic shared memory on `stream`: `kernel<<<...>>>(args...)`. A
/// function rather than the launch syntax so that the host emulator
/// (Emulator/Device.h, which has no such syntax) runs the same launch sites.
/// The arguments convert to the kernel's parameter types, as in a call.
template <typename T> struct NonDeduced { using type = T; };
template <typename... Params>
void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                  size_t shared, cudaStream_t stream,
                  typename NonDeduced<Params>::type... args) {
#ifdef LOOM_CUDA_EMULATOR
  emulator::launch(reinterpret_cast<const void *>(kernel), grid, block, shared,
                   stream, [=] { kernel(args...); });
#else
  kernel<<<grid, block, shared, stream>>>(args...);
#endif
}

/// The block's dynamic shared memory (the launch's `shared` bytes), 128-byte
/// aligned.
__device__ inline unsigned char *dynamicShared() {
#ifdef LOOM_CUDA_EMULATOR
  return emulator::dynamicShared();
#else
  extern __shared__ __align__(128) unsigned char loomDynamicShared[];
  return loomDynamicShared;
#endif
}

/// The most dynamic shared memory a block of the current device may opt
/// into (cudaFuncAttributeMaxDynamicSharedMemorySize).
inline Status sharedMemoryOptIn(int &bytes) {
  int device = 0;
  if (Status s = cudaStatus(cudaGetDevice(&device), "cudaGetDevice"); !s)
    return s;
  return cudaStatus(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device),
      "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
}

/// Last launch error of this thread, as a Status.
inline Status launchStatus(const char *what) {
  return cudaStatus(cudaGetLastError(), what);
}

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_DEVICE_CUH
