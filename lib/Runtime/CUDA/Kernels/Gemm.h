//===- Gemm.h - The CUDA matmul kernel (internal) ---------------*- C++ -*-===//
//
// The matmul kernel's class, shared by Gemm.cpp (descriptors, algorithm,
// launch) and GemmTuning.cpp (timing cuBLASLt's candidate algorithms).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_GEMM_H
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_GEMM_H

#include "Common.h"

#include <cublasLt.h>

#include <string>
#include <vector>

namespace loomrt {
namespace cuda {

inline Status cublasStatus(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string("matmul: ") + what + ": " +
                       cublasLtGetStatusName(status) + " (" +
                       cublasLtGetStatusString(status) + ")");
}

#define LOOM_CUBLAS(call, what)                                                \
  do {                                                                         \
    if (Status s_ = cublasStatus((call), what); !s_)                           \
      return s_;                                                               \
  } while (false)

/// cuBLASLt descriptors, destroyed with the kernel. `epilogue` is the
/// matmul descriptor with cuBLASLt's epilogue, when one is used.
struct MatmulDescriptors {
  cublasLtMatmulDesc_t matmul = nullptr, epilogue = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~MatmulDescriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (epilogue)
      cublasLtMatmulDescDestroy(epilogue);
    if (matmul)
      cublasLtMatmulDescDestroy(matmul);
  }
};

/// How many of the heuristic's algorithms tuning times, how many launches
/// each (after one to warm up), and how much faster than the heuristic's
/// first another must be to replace it.
constexpr int kTuneCandidates = 8;
constexpr int kTuneRepeats = 3;
constexpr double kTuneMargin = 0.02;

/// Bytes one kept input takes in the tuning scratch (256-byte aligned, as
/// cudaMalloc's blocks are).
inline uint64_t alignScratch(uint64_t bytes) { return (bytes + 255) & ~255ull; }

/// One launch's operands, device pointers.
struct MatmulOperands {
  const char *a = nullptr, *b = nullptr;
  char *c = nullptr;
  /// cuBLASLt's bias pointer: the bias input, or the bias gradient output.
  const void *bias = nullptr;
  void *pre = nullptr;
  /// The GELU's input of an `activation_grad` (cuBLASLt's aux).
  const void *geluInput = nullptr;
  const char *addend = nullptr;
};

class MatmulKernel : public CUDAKernel {
public:
  Status prepare(const LaunchContext &context, const Instruction &inst);
  Status launch(const LaunchContext &context, const void *const *inputs,
                void *const *outputs) override;
  Status tune(const LaunchContext &context, const void *const *inputs,
              void *const *outputs, MatmulTuning &tuning) override;
  uint64_t tuningScratchBytes() const override;
  std::string epilogueChoice() const override;

private:
  MatmulOperands operands(const void *const *inputs,
                          void *const *outputs) const;
  /// The algorithm a launch with `ops` uses (cuBLASLt's epilogue, or the
  /// plain GEMM for aligned or misaligned operands), with the descriptor
  /// and operand alignment it was chosen for.
  struct Slot {
    cublasLtMatmulAlgo_t *algo;
    cublasLtMatmulDesc_t desc;
    uint32_t alignment;
    const char *name;
  };
  Slot slotFor(const MatmulOperands &ops);
  /// Whether call `call`'s operands suit the 16-byte algorithm.
  bool callAligned(const MatmulOperands &ops, int64_t call) const;
  /// The cuBLASLt calls of a launch (the own epilogue kernel excluded);
  /// `fused` says whether cuBLASLt's epilogue ran.
  Status launchProducts(const LaunchContext &context, const MatmulOperands &ops,
                        bool &fused);
  /// The best time of kTuneRepeats launches of the products, after one to
  /// warm up; infinity when cuBLASLt refuses the algorithm.
  StatusOr<double> timeProducts(const LaunchContext &context,
                                const MatmulOperands &ops, cudaEvent_t start,
                                cudaEvent_t stop);
  /// Up to `requested` of the heuristic's algorithms, best first.
  Status heuristics(const LaunchContext &context, cublasLtMatmulDesc_t desc,
                    uint32_t alignment, int requested,
                    std::vector<cublasLtMatmulHeuristicResult_t> &results);
  /// One cuBLASLt call's operands; `lt*` name cuBLASLt's A (our B) and B
  /// (our A).
  Status layout(cublasLtMatrixLayout_t &layout, cudaDataType_t type,
                uint64_t rows, uint64_t cols, int64_t ld, int64_t batch,
                int64_t stride);
  Status chooseAlgorithm(const LaunchContext &context,
                         cublasLtMatmulDesc_t desc, uint32_t alignment,
                         cublasLtMatmulAlgo_t &algo, bool &found);
  Status createDesc(cublasLtMatmulDesc_t &desc, bool transA, bool transB);
  /// Prepares cuBLASLt's epilogue for a single GEMM, if it has one.
  Status prepareEpilogue(const LaunchContext &context, int64_t n, bool transA,
                         bool transB);
  /// The GEMM with cuBLASLt's epilogue; false (nothing done) when a pointer
  /// is not aligned for it.
  StatusOr<bool> launchFused(const LaunchContext &context,
                             const MatmulOperands &ops);

  MatmulDescriptors d_;
  /// The operands' type, and the result's (C and D): f32 for a bf16 GEMM
  /// with an f32 result, else the operands'.
  cudaDataType_t type_ = CUDA_R_32F, outType_ = CUDA_R_32F;
  DType dtype_ = DType::F32, outDtype_ = DType::F32;
  size_t elementSize_ = 4, outElementSize_ = 4;
  /// Whether the last input is added (C with beta = 1).
  bool addend_ = false;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  cudaDataType_t scaleType_ = CUDA_R_32F;
  /// The epilogue: bias input, preactivation output, activation; rows and
  /// columns of C as one matrix; cuBLASLt's epilogue algorithm, if any.
  bool bias_ = false, pre_ = false;
  /// The bias gradient: the operand summed over K (0 lhs, 1 rhs; -1 none),
  /// its length, K, and whether it is stored [K, length].
  int summed_ = -1;
  int64_t sumLength_ = 0, k_ = 0;
  bool kMajor_ = false;
  MatmulActivation activation_ = MatmulActivation::None;
  /// C is multiplied by the tanh GELU's derivative at the third input
  /// (`activation_grad`: cuBLASLt's DGELU).
  bool geluGrad_ = false;
  int64_t rows_ = 0, n_ = 0;
  cublasLtMatmulAlgo_t epilogueAlgo_{};
  bool haveEpilogueAlgo_ = false;
  /// cuBLASLt's epilogue when it has an algorithm for it, else why the own
  /// kernel runs it (epilogueChoice).
  std::string epilogueChoice_;
  bool hasEpilogue() const {
    return bias_ || activation_ != MatmulActivation::None || summed_ >= 0 ||
           geluGrad_;
  }
  /// 1 in the scale type (f32 for f32 and bf16, f64 for f64); beta is 0.
  float oneF_ = 1, zeroF_ = 0;
  double oneD_ = 1, zeroD_ = 0;
  bool scaleDouble_ = false;
  /// The alpha or beta of the scale type.
  const void *scale(const float &f, const double &d) const {
    return scaleDouble_ ? static_cast<const void *>(&d)
                        : static_cast<const void *>(&f);
  }
  cublasLtMatmulAlgo_t aligned_{}, unaligned_{};
  bool haveAligned_ = false;
  size_t workspaceBytes_ = 0;
  /// Calls, batches per call and the batch counts/strides (in elements).
  int64_t calls_ = 0, perCall_ = 1;
  int64_t batchA_ = 1, batchB_ = 1;
  int64_t sizeA_ = 0, sizeB_ = 0, sizeC_ = 0;
  /// C's bytes, for k = 0 (C is all zeros).
  uint64_t zeroBytes_ = 0;
  /// The operands' bytes (tuning keeps the inputs an output overlaps).
  std::vector<uint64_t> inputBytes_, outputBytes_;
  /// Scratch tuning needs to keep the inputs the plan lets an output
  /// overlap (tuningScratchBytes).
  uint64_t keptBytes_ = 0;
  /// What makes two matmuls the same problem for tuning; whether this one
  /// was tuned.
  std::string problemKey_;
  bool tuned_ = false;
};

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_GEMM_H
