//===- GemmEpilogue.cu - A matmul's epilogue as its own kernel ------------===//
//
// The bias and activation of a fused matmul, applied in place to the GEMM's
// stored result, for the cases cuBLASLt's epilogues do not cover: batched
// GEMMs, a ReLU whose input is kept, an auxiliary output whose leading
// dimension cuBLASLt rejects, f64, misaligned pointers. It computes as the
// CPU kernel does (f32 for f32 and bf16, f64 for f64, the same activation
// formulas), but a bf16 result has already been rounded once by the GEMM,
// so bf16 results may differ from the CPU's by a rounding step.
//
// And the GELU gradient of an input-gradient GEMM (`activation_grad`) that
// cuBLASLt's DGELU does not take: the stored product times the tanh
// GELU's derivative at the GELU's input, as the CPU computes it.
//
// It also holds the bias gradient of a weight-gradient GEMM whose BGRADA or
// BGRADB epilogue cuBLASLt refuses: the summed operand's sum over K, 32
// outputs per block, 32 threads per output splitting the K rows and adding
// their partial sums in a fixed order. bf16 sums in f32, as cuBLASLt's
// epilogue does; f32 and f64 sum in f64, as the CPU kernel does.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

__device__ inline float activate(MatmulActivation activation, float x) {
  switch (activation) {
  case MatmulActivation::Relu:
    return x < 0.0f ? 0.0f : x;
  case MatmulActivation::GeluTanh: {
    // x * sigmoid(2u): no cancellation for negative x (the CPU's form).
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    float d = 1.0f + expf(-2.0f * u);
    return isinf(d) ? 0.0f : x / d;
  }
  case MatmulActivation::None:
    break;
  }
  return x;
}
__device__ inline double activate(MatmulActivation activation, double x) {
  switch (activation) {
  case MatmulActivation::Relu:
    return x < 0.0 ? 0.0 : x;
  case MatmulActivation::GeluTanh:
    return 0.5 * x *
           (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case MatmulActivation::None:
    break;
  }
  return x;
}

/// `C` is the type computed in: f32 for f32 and bf16, f64 for f64.
template <typename T, typename C>
__global__ void epilogue(T *c, const T *bias, T *pre, int64_t total, int64_t n,
                         MatmulActivation activation) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    C v = widen(c[i]);
    if (bias)
      v = v + widen(bias[i % n]);
    if (pre)
      store(pre + i, v);
    store(c + i, activate(activation, v));
  }
}

/// The tanh GELU's derivative, 0.5 (1 + t) + 0.5 x (1 - t^2) u' with
/// t = tanh(u), u = k (x + 0.044715 x^3): the CPU's form.
__device__ inline float geluTanhSlope(float x) {
  const float k = 0.7978845608028654f;
  float x2 = x * x, t = tanhf(k * (x + 0.044715f * x2 * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * ((1.0f - t * t) * k * (1.0f + 0.134145f * x2));
}
__device__ inline double geluTanhSlope(double x) {
  const double k = 0.7978845608028654;
  double x2 = x * x, t = tanh(k * (x + 0.044715 * x2 * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * ((1.0 - t * t) * k * (1.0 + 0.134145 * x2));
}

template <typename T, typename C>
__global__ void geluGradEpilogue(T *c, const T *x, int64_t total) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    store(c + i, C(widen(c[i])) * geluTanhSlope(C(widen(x[i]))));
}

template <typename T, typename C>
Status launchGeluGrad(cudaStream_t stream, void *c, const void *x,
                      int64_t total) {
  launchKernel(geluGradEpilogue<T, C>, gridFor(total), kThreads, 0, stream,
               static_cast<T *>(c), static_cast<const T *>(x), total);
  return launchStatus("matmul GELU gradient");
}

constexpr int kSumColumns = 32, kSumSplit = 32;

/// `sum[j]` = the sum over k of x[k * length + j] (kMajor) or
/// x[j * k + k'] (not kMajor), accumulated in `A`.
template <typename T, typename A>
__global__ void operandSum(const T *x, T *sum, int64_t k, int64_t length,
                           bool kMajor) {
  __shared__ A partial[kSumSplit][kSumColumns];
  const int64_t j = int64_t(blockIdx.x) * kSumColumns + threadIdx.x;
  A acc = 0;
  if (j < length)
    for (int64_t row = threadIdx.y; row < k; row += kSumSplit)
      acc += A(widen(kMajor ? x[row * length + j] : x[j * k + row]));
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || j >= length)
    return;
  A total = 0;
  for (int split = 0; split < kSumSplit; ++split)
    total += partial[split][threadIdx.x];
  store(sum + j, total);
}

template <typename T, typename A>
Status launchSum(cudaStream_t stream, const void *x, void *sum, int64_t k,
                 int64_t length, bool kMajor) {
  dim3 grid(unsigned((length + kSumColumns - 1) / kSumColumns));
  dim3 block(kSumColumns, kSumSplit);
  launchKernel(operandSum<T, A>, grid, block, 0, stream,
               static_cast<const T *>(x), static_cast<T *>(sum), k, length,
               kMajor);
  return launchStatus("matmul bias gradient");
}

template <typename T, typename C>
Status launchTyped(cudaStream_t stream, void *c, const void *bias, void *pre,
                   int64_t total, int64_t n, MatmulActivation activation) {
  launchKernel(epilogue<T, C>, gridFor(total), kThreads, 0, stream,
               static_cast<T *>(c), static_cast<const T *>(bias),
               static_cast<T *>(pre), total, n, activation);
  return launchStatus("matmul epilogue");
}

} // namespace

Status cuda::launchMatmulEpilogue(cudaStream_t stream, DType dtype, void *c,
                                  const void *bias, void *pre, int64_t rows,
                                  int64_t n, MatmulActivation activation) {
  const int64_t total = rows * n;
  if (total == 0)
    return Status::ok();
  switch (dtype) {
  case DType::F32:
    return launchTyped<float, float>(stream, c, bias, pre, total, n,
                                     activation);
  case DType::F64:
    return launchTyped<double, double>(stream, c, bias, pre, total, n,
                                       activation);
  case DType::BF16:
    return launchTyped<BF16, float>(stream, c, bias, pre, total, n, activation);
  default:
    return Status::error(std::string("matmul epilogue: no ") +
                         dtypeName(dtype) + " kernel");
  }
}

Status cuda::launchMatmulGeluGrad(cudaStream_t stream, DType dtype, void *c,
                                  const void *x, int64_t total) {
  if (total == 0)
    return Status::ok();
  switch (dtype) {
  case DType::F32:
    return launchGeluGrad<float, float>(stream, c, x, total);
  case DType::F64:
    return launchGeluGrad<double, double>(stream, c, x, total);
  case DType::BF16:
    return launchGeluGrad<BF16, float>(stream, c, x, total);
  default:
    return Status::error(std::string("matmul GELU gradient: no ") +
                         dtypeName(dtype) + " kernel");
  }
}

Status cuda::launchOperandSum(cudaStream_t stream, DType dtype, const void *x,
                              void *sum, int64_t k, int64_t length,
                              bool kMajor) {
  if (length == 0)
    return Status::ok();
  switch (dtype) {
  case DType::F32:
    return launchSum<float, double>(stream, x, sum, k, length, kMajor);
  case DType::F64:
    return launchSum<double, double>(stream, x, sum, k, length, kMajor);
  case DType::BF16:
    return launchSum<BF16, float>(stream, x, sum, k, length, kMajor);
  default:
    return Status::error(std::string("matmul bias gradient: no ") +
                         dtypeName(dtype) + " kernel");
  }
}
