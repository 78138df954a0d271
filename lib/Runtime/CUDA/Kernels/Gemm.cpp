//===- Gemm.cpp - The CUDA matmul kernel (cuBLASLt) -----------------------===//
//
// `matmul`: C[b..., M, N] = op(A)[b..., M, K] * op(B)[b..., K, N] with the
// CPU kernel's batching (the batch dims of A and B are suffixes of C's; an
// operand with fewer is shared by the batches it lacks).
//
// cuBLASLt is column-major and the operands are row-major, so it computes
// C^T = op(B)^T op(A)^T: a row-major [R, S] matrix is a column-major S x R
// one, so B goes in as cuBLASLt's A and A as its B, and C comes out
// row-major without any copy.
//
// Batches:
//  - A batched, B shared, A not transposed: the batches of A are consecutive
//    rows of one [batch * M, K] matrix, so it is one GEMM (a linear layer);
//  - otherwise one strided-batched call over P batches, an operand with one
//    batch getting stride 0. P is the whole batch unless an operand has a
//    proper suffix of C's batch dims; then P is the smallest batched operand's
//    batch count, and the calls run over C's outer batches one after the
//    other (each operand's base then advances modulo its own batch count).
//
// Descriptors, layouts and the algorithm are chosen once, when the kernel is
// created: one algorithm for operands aligned to 16 bytes (arena offsets
// are 64-byte aligned, so that is the usual case) and one for any alignment
// of the element size, which launch falls back to for misaligned pointers.
//
// f32 computes in f32, or in TF32 on tensor cores when the executor allows
// it; f64 in f64; bf16 operands are stored bf16 and accumulate in f32.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <cublasLt.h>

#include <algorithm>

using namespace loom::runtime;
using namespace loom::runtime::cuda;

namespace {

Status cublasStatus(cublasStatus_t status, const char *what) {
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

/// cuBLASLt descriptors, destroyed with the kernel.
struct Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (matmul)
      cublasLtMatmulDescDestroy(matmul);
  }
};

class MatmulKernel : public CUDAKernel {
public:
  Status prepare(const LaunchContext &context, const Instruction &inst);
  Status launch(const LaunchContext &context, const void *const *inputs,
                void *const *outputs) override;

private:
  /// One cuBLASLt call's operands; `lt*` name cuBLASLt's A (our B) and B
  /// (our A).
  Status layout(cublasLtMatrixLayout_t &layout, uint64_t rows, uint64_t cols,
                int64_t ld, int64_t batch, int64_t stride);
  Status chooseAlgorithm(const LaunchContext &context, uint32_t alignment,
                         cublasLtMatmulAlgo_t &algo, bool &found);

  Descriptors d_;
  cudaDataType_t type_ = CUDA_R_32F;
  size_t elementSize_ = 4;
  /// 1 in the scale type (f32 for f32 and bf16, f64 for f64); beta is 0.
  float oneF_ = 1, zeroF_ = 0;
  double oneD_ = 1, zeroD_ = 0;
  bool scaleDouble_ = false;
  cublasLtMatmulAlgo_t aligned_{}, unaligned_{};
  bool haveAligned_ = false;
  size_t workspaceBytes_ = 0;
  /// Calls, batches per call and the batch counts/strides (in elements).
  int64_t calls_ = 0, perCall_ = 1;
  int64_t batchA_ = 1, batchB_ = 1;
  int64_t sizeA_ = 0, sizeB_ = 0, sizeC_ = 0;
  /// C's bytes, for k = 0 (C is all zeros).
  uint64_t zeroBytes_ = 0;
};

Status MatmulKernel::layout(cublasLtMatrixLayout_t &layout, uint64_t rows,
                            uint64_t cols, int64_t ld, int64_t batch,
                            int64_t stride) {
  LOOM_CUBLAS(cublasLtMatrixLayoutCreate(&layout, type_, rows, cols, ld),
              "creating a matrix layout");
  if (batch == 1)
    return Status::ok();
  int32_t count = int32_t(batch);
  LOOM_CUBLAS(
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
      "setting the batch count");
  LOOM_CUBLAS(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                  sizeof(stride)),
              "setting the batch stride");
  return Status::ok();
}

Status MatmulKernel::chooseAlgorithm(const LaunchContext &context,
                                     uint32_t alignment,
                                     cublasLtMatmulAlgo_t &algo, bool &found) {
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    LOOM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
                    d_.preference, attribute, &alignment, sizeof(alignment)),
                "setting the operand alignment");
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(context.lt, d_.matmul, d_.a, d_.b, d_.c,
                                     d_.c, d_.preference, 1, &result, &count);
  // "Not supported" is how cuBLASLt says it has no algorithm.
  found = false;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED)
    return Status::ok();
  LOOM_CUBLAS(status, "choosing an algorithm");
  found = count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (found)
    algo = result.algo;
  return Status::ok();
}

Status MatmulKernel::prepare(const LaunchContext &context,
                             const Instruction &inst) {
  const TensorRef &a = inst.inputs[0], &b = inst.inputs[1],
                  &c = inst.outputs[0];
  const bool transA = intAttr(inst.attrs, "transpose_lhs") != 0;
  const bool transB = intAttr(inst.attrs, "transpose_rhs") != 0;
  cublasComputeType_t compute;
  cudaDataType_t scaleType;
  switch (a.dtype) {
  case DType::F32:
    type_ = CUDA_R_32F;
    compute =
        context.allowTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    scaleType = CUDA_R_32F;
    break;
  case DType::F64:
    type_ = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
    scaleType = CUDA_R_64F;
    scaleDouble_ = true;
    break;
  case DType::BF16:
    type_ = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
    scaleType = CUDA_R_32F;
    break;
  default:
    return Status::error(std::string("the CUDA backend has no ") +
                         dtypeName(a.dtype) + " matmul");
  }
  elementSize_ = dtypeSize(a.dtype);

  const size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  const int64_t m = transA ? a.shape[ra - 1] : a.shape[ra - 2];
  const int64_t k = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t n = transB ? b.shape[rb - 2] : b.shape[rb - 1];
  const int64_t batchC = product(c.shape, 0, rc - 2);
  batchA_ = product(a.shape, 0, ra - 2);
  batchB_ = product(b.shape, 0, rb - 2);
  sizeA_ = m * k;
  sizeB_ = k * n;
  sizeC_ = m * n;
  workspaceBytes_ = context.workspaceBytes;
  if (batchC == 0 || m == 0 || n == 0)
    return Status::ok(); // nothing to compute: calls_ = 0
  if (k == 0) {
    zeroBytes_ = c.bytes();
    return Status::ok();
  }

  // The calls: fold A's batches into M, or P batches per call.
  int64_t rowsM = m;
  if (!transA && batchB_ == 1 && batchA_ == batchC) {
    rowsM = batchC * m;
    perCall_ = 1;
    calls_ = 1;
  } else {
    perCall_ = batchC;
    for (int64_t batch : {batchA_, batchB_})
      if (batch > 1)
        perCall_ = std::min(perCall_, batch);
    calls_ = batchC / perCall_;
  }
  if (perCall_ > INT32_MAX)
    return Status::error("matmul: " + std::to_string(perCall_) +
                         " batches are more than cuBLASLt takes in one call");
  auto strideOf = [&](int64_t batch, int64_t size) {
    return batch == 1 ? int64_t(0) : size;
  };

  LOOM_CUBLAS(cublasLtMatmulDescCreate(&d_.matmul, compute, scaleType),
              "creating the matmul descriptor");
  // cuBLASLt's A is our B, its B our A (see the file comment).
  cublasOperation_t opLtA = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opLtB = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(d_.matmul,
                                             CUBLASLT_MATMUL_DESC_TRANSA,
                                             &opLtA, sizeof(opLtA)),
              "setting transa");
  LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(d_.matmul,
                                             CUBLASLT_MATMUL_DESC_TRANSB,
                                             &opLtB, sizeof(opLtB)),
              "setting transb");
  // Our B, row-major [K, N] (or [N, K] transposed): column-major N x K with
  // ld N (or K x N with ld K).
  if (Status s = transB ? layout(d_.a, uint64_t(k), uint64_t(n), k, perCall_,
                                 strideOf(batchB_, sizeB_))
                        : layout(d_.a, uint64_t(n), uint64_t(k), n, perCall_,
                                 strideOf(batchB_, sizeB_));
      !s)
    return s;
  // Our A, row-major [M, K] (or [K, M]): column-major K x M with ld K (or
  // M x K with ld M).
  if (Status s = transA ? layout(d_.b, uint64_t(rowsM), uint64_t(k), rowsM,
                                 perCall_, strideOf(batchA_, sizeA_))
                        : layout(d_.b, uint64_t(k), uint64_t(rowsM), k,
                                 perCall_, strideOf(batchA_, sizeA_));
      !s)
    return s;
  // C: column-major N x M, ld N.
  if (Status s =
          layout(d_.c, uint64_t(n), uint64_t(rowsM), n, perCall_, sizeC_);
      !s)
    return s;

  LOOM_CUBLAS(cublasLtMatmulPreferenceCreate(&d_.preference),
              "creating the preference");
  uint64_t workspace = context.workspaceBytes;
  LOOM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
                  d_.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                  &workspace, sizeof(workspace)),
              "setting the workspace size");
  // The 16-byte algorithm needs every batch of a call aligned too (the
  // launch checks each call's first pointers).
  bool stridesAligned = true;
  for (int64_t stride :
       {strideOf(batchA_, sizeA_), strideOf(batchB_, sizeB_), sizeC_})
    stridesAligned =
        stridesAligned && (stride * int64_t(elementSize_)) % 16 == 0;
  if (perCall_ == 1)
    stridesAligned = true;
  if (stridesAligned)
    if (Status s = chooseAlgorithm(context, 16, aligned_, haveAligned_); !s)
      return s;
  bool haveUnaligned = false;
  if (Status s = chooseAlgorithm(context, uint32_t(elementSize_), unaligned_,
                                 haveUnaligned);
      !s)
    return s;
  if (!haveUnaligned)
    return Status::error(
        "matmul: cuBLASLt has no algorithm for " +
        std::string(dtypeName(a.dtype)) + " lhs " + shapeString(a.shape) +
        ", rhs " + shapeString(b.shape) + " with " +
        std::to_string(context.workspaceBytes) + " bytes of workspace");
  return Status::ok();
}

Status MatmulKernel::launch(const LaunchContext &context,
                            const void *const *inputs, void *const *outputs) {
  const char *a = static_cast<const char *>(inputs[0]);
  const char *b = static_cast<const char *>(inputs[1]);
  char *c = static_cast<char *>(outputs[0]);
  if (zeroBytes_)
    return cudaStatus(cudaMemsetAsync(c, 0, zeroBytes_, context.stream),
                      "matmul (k = 0)");
  if (calls_ == 0)
    return Status::ok();
  if (context.workspaceBytes < workspaceBytes_)
    return Status::error("matmul: prepared for " +
                         std::to_string(workspaceBytes_) +
                         " bytes of workspace, launched with " +
                         std::to_string(context.workspaceBytes));
  const void *one = scaleDouble_ ? static_cast<const void *>(&oneD_)
                                 : static_cast<const void *>(&oneF_);
  const void *zero = scaleDouble_ ? static_cast<const void *>(&zeroD_)
                                  : static_cast<const void *>(&zeroF_);
  const size_t e = elementSize_;
  for (int64_t call = 0; call < calls_; ++call) {
    const int64_t first = call * perCall_;
    // Each operand's first batch of this call (the call's batches then
    // advance by the operand's stride: perCall_ divides every batch count
    // larger than 1).
    const char *pa = a + (batchA_ == 1 ? 0 : first % batchA_) * sizeA_ * e;
    const char *pb = b + (batchB_ == 1 ? 0 : first % batchB_) * sizeB_ * e;
    char *pc = c + first * sizeC_ * e;
    const bool isAligned = haveAligned_ && (reinterpret_cast<uintptr_t>(pa) |
                                            reinterpret_cast<uintptr_t>(pb) |
                                            reinterpret_cast<uintptr_t>(pc)) %
                                                   16 ==
                                               0;
    const cublasLtMatmulAlgo_t *algo = isAligned ? &aligned_ : &unaligned_;
    LOOM_CUBLAS(cublasLtMatmul(context.lt, d_.matmul, one, pb, d_.a, pa, d_.b,
                               zero, pc, d_.c, pc, d_.c, algo,
                               context.workspace, workspaceBytes_,
                               context.stream),
                "cublasLtMatmul");
  }
  return Status::ok();
}

} // namespace

KernelOr cuda::createMatmul(const LaunchContext &context,
                            const Instruction &inst) {
  auto kernel = std::make_unique<MatmulKernel>();
  if (Status s = kernel->prepare(context, inst); !s)
    return s;
  return KernelPtr(std::move(kernel));
}
