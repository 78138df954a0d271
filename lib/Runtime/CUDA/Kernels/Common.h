//===- Common.h - Shared by the CUDA kernel files (internal) ----*- C++ -*-===//
//
// What the kernel files of the CUDA backend share on the host: one factory
// per kernel family (Registry.cpp dispatches to them after the CPU check has
// validated the instruction, so they may trust shapes and attributes), the
// attribute readers for such validated instructions, and CUDA error
// reporting. Host-only; the device helpers are in Device.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_COMMON_H
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_COMMON_H

#include "CUDA/CUDAKernels.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {
namespace cuda {

using KernelPtr = std::unique_ptr<CUDAKernel>;
using KernelOr = StatusOr<KernelPtr>;

//===----------------------------------------------------------------------===//
// Factories (one per kernel family). `instruction` passed the CPU check.
//===----------------------------------------------------------------------===//

// Gemm.cpp
KernelOr createMatmul(const LaunchContext &context,
                      const Instruction &instruction);

/// The activation of a matmul's epilogue (the `activation` attribute).
enum class MatmulActivation { None, Relu, GeluTanh };

// GemmEpilogue.cu: the epilogue on the stored [rows, n] result, in place:
// adds `bias` (optional) along the rows, stores that into `pre` (optional),
// then applies `activation`.
Status launchMatmulEpilogue(cudaStream_t stream, DType dtype, void *c,
                            const void *bias, void *pre, int64_t rows,
                            int64_t n, MatmulActivation activation);
/// GemmEpilogue.cu: an `activation_grad=gelu_tanh` epilogue on the stored
/// result, in place: `c[i] *= gelu'(x[i])` (the tanh GELU) over `total`
/// elements.
Status launchMatmulGeluGrad(cudaStream_t stream, DType dtype, void *c,
                            const void *x, int64_t total);
/// GemmEpilogue.cu: the bias gradient of a weight-gradient GEMM when
/// cuBLASLt does not store it: `sum[j]` = the sum over the k rows of the
/// summed operand, stored [k, length] (kMajor) or [length, k].
Status launchOperandSum(cudaStream_t stream, DType dtype, const void *x,
                        void *sum, int64_t k, int64_t length, bool kMajor);
// Elementwise.cpp
KernelOr createElementwise(const LaunchContext &context,
                           const Instruction &instruction);
// Reduce.cu: reduce_sum, reduce_mean, reduce_max.
KernelOr createReduce(const LaunchContext &context,
                      const Instruction &instruction);
KernelOr createCumsum(const LaunchContext &context,
                      const Instruction &instruction);
/// Into how many chunks a reduction cuts each output's `count` reduced
/// elements when its unchunked launch has `blocks` blocks: enough for about
/// kReductionBlocksPerSM blocks per multiprocessor, each chunk at least
/// `minChunk` elements, the partial results (`bytesPerChunk` per chunk) in
/// `workspaceBytes`. 1 (not chunked) when the launch fills the device
/// already, or `multiprocessors` is unknown (0).
constexpr int64_t kReductionBlocksPerSM = 4;
int64_t reductionChunks(int64_t blocks, int64_t count, int64_t minChunk,
                        uint64_t bytesPerChunk, int multiprocessors,
                        uint64_t workspaceBytes);
// Normalization.cu: softmax and log_softmax, layer_norm and cross_entropy
// and their backwards.
KernelOr createSoftmax(const LaunchContext &context,
                       const Instruction &instruction);
KernelOr createLayerNorm(const LaunchContext &context,
                         const Instruction &instruction);
KernelOr createLayerNormBackward(const LaunchContext &context,
                                 const Instruction &instruction);
KernelOr createCrossEntropy(const LaunchContext &context,
                            const Instruction &instruction);
KernelOr createCrossEntropyBackward(const LaunchContext &context,
                                    const Instruction &instruction);
// ScatterAdd.cu
KernelOr createScatterAdd(const LaunchContext &context,
                          const Instruction &instruction);
// DataMovement.cu
KernelOr createGather(const LaunchContext &context,
                      const Instruction &instruction);
KernelOr createTranspose(const LaunchContext &context,
                         const Instruction &instruction);
KernelOr createSlice(const LaunchContext &context,
                     const Instruction &instruction);
KernelOr createConcat(const LaunchContext &context,
                      const Instruction &instruction);
KernelOr createSplit(const LaunchContext &context,
                     const Instruction &instruction);
KernelOr createCopy(const LaunchContext &context,
                    const Instruction &instruction);
KernelOr createDropout(const LaunchContext &context,
                       const Instruction &instruction);
// Attention.cu: attention (flash kernels for bf16 with head dims up to 128,
// generic ones otherwise) and attention_backward.
KernelOr createAttention(const LaunchContext &context,
                         const Instruction &instruction);
KernelOr createAttentionBackward(const LaunchContext &context,
                                 const Instruction &instruction);

//===----------------------------------------------------------------------===//
// Helpers (Registry.cpp)
//===----------------------------------------------------------------------===//

/// A kernel whose launch is a function (most kernels: their geometry is
/// captured by value when they are created).
class FunctionKernel : public CUDAKernel {
public:
  using Launch = std::function<Status(const LaunchContext &,
                                      const void *const *, void *const *)>;
  explicit FunctionKernel(Launch launch) : launch_(std::move(launch)) {}
  Status launch(const LaunchContext &context, const void *const *inputs,
                void *const *outputs) override {
    return launch_(context, inputs, outputs);
  }

private:
  Launch launch_;
};

inline KernelOr makeKernel(FunctionKernel::Launch launch) {
  return KernelPtr(new FunctionKernel(std::move(launch)));
}

/// Attribute readers for instructions the CPU check accepted: a missing
/// attribute gives `fallback`.
int64_t intAttr(const Attributes &attrs, const std::string &name,
                int64_t fallback = 0);
double doubleAttr(const Attributes &attrs, const std::string &name,
                  double fallback = 0);
std::vector<int64_t> intListAttr(const Attributes &attrs,
                                 const std::string &name);
std::string wordAttr(const Attributes &attrs, const std::string &name,
                     const std::string &fallback = "");
/// `axis` (negative counts from the end) resolved against `rank`.
int64_t resolveAxis(int64_t axis, size_t rank);
/// Product of shape[begin..end).
int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end);

/// Ok, or an error "`what`: cudaErrorX (its description)".
Status cudaStatus(cudaError_t error, const std::string &what);

/// The most dims the index-decoding kernels take (after merging dims, which
/// rarely leaves more than four).
constexpr int kMaxDims = 12;

/// Fails when a tensor of the instruction would need more than kMaxDims dims
/// in a strided kernel.
Status expectDimsAtMost(size_t dims, const std::string &what);

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_COMMON_H
