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
// `loom-run --tune-matmuls` may replace them by faster ones (GemmTuning.cpp).
//
// f32 computes in f32, or in TF32 on tensor cores when the executor allows
// it; f64 in f64; bf16 operands are stored bf16 and accumulate in f32.
//
// Epilogues (a bias input, an `activation`, a preactivation output): a
// single f32 or bf16 GEMM uses cuBLASLt's own (BIAS, GELU_BIAS,
// GELU_AUX_BIAS and their bias-less forms) when cuBLASLt has an algorithm
// for it and every pointer is 16-byte aligned; otherwise (batched GEMMs, an
// auxiliary leading dimension not a multiple of 8, f64, no algorithm or an
// epilogue cuBLASLt refuses) the plain GEMM is followed by GemmEpilogue.cu's
// kernel. cuBLASLt's GELU is the tanh form, the one the `gelu_tanh`
// activation names. ReLU is never cuBLASLt's: its RELU epilogues are
// documented as max(x, 0), which may turn NaN into 0 where the CPU's keeps
// NaN, so a ReLU after a fused BIAS runs in the own kernel.
//
// An addend (`accumulate=1`, the last input: a residual) is cuBLASLt's C
// with beta = 1, in every path (the own epilogue kernel then adds the bias
// to a sum that already holds it). bf16 operands may have an f32 result
// (C, D and the bias f32): the residual projections of mixed precision.
//
// An activation gradient (`activation_grad=gelu_tanh`, the input gradient
// of a linear layer a tanh GELU feeds) is cuBLASLt's DGELU, the GELU's
// input (the third input, the result's type) its aux, for bf16 results
// only; otherwise (f32, whose DGELU is too coarse; batched GEMMs, an aux
// leading dimension not a multiple of 8, f64, misaligned pointers, no
// algorithm) GemmEpilogue.cu's kernel multiplies the stored product (a
// bf16 one then rounded twice).
//
// A bias gradient (`bias_grad`, the second output of a weight-gradient
// GEMM) is cuBLASLt's BGRADB when our lhs is summed (it is cuBLASLt's B)
// and BGRADA when our rhs is; it has C's type, as the plan's output does.
// Where cuBLASLt refuses it, GemmEpilogue.cu's kernel sums the operand
// after the plain GEMM.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "OperandSpans.h"

#include <algorithm>

using namespace loomrt;
using namespace loomrt::cuda;

Status MatmulKernel::layout(cublasLtMatrixLayout_t &layout, cudaDataType_t type,
                            uint64_t rows, uint64_t cols, int64_t ld,
                            int64_t batch, int64_t stride) {
  LOOM_CUBLAS(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld),
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

Status MatmulKernel::heuristics(
    const LaunchContext &context, cublasLtMatmulDesc_t desc, uint32_t alignment,
    int requested, std::vector<cublasLtMatmulHeuristicResult_t> &results) {
  // The operands are at least `alignment`-aligned, and C and D (f32 for an
  // f32 result of bf16 operands) at least to their element size.
  const uint32_t outAlignment = std::max(alignment, uint32_t(outElementSize_));
  for (auto [attribute, bytes] :
       {std::pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment),
        std::pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment),
        std::pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, outAlignment),
        std::pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, outAlignment)})
    LOOM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(d_.preference, attribute,
                                                     &bytes, sizeof(bytes)),
                "setting the operand alignment");
  results.assign(size_t(requested), cublasLtMatmulHeuristicResult_t{});
  int count = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      context.lt, desc, d_.a, d_.b, d_.c, d_.c, d_.preference, requested,
      results.data(), &count);
  // "Not supported" is how cuBLASLt says it has no algorithm.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED)
    count = 0;
  else
    LOOM_CUBLAS(status, "choosing an algorithm");
  results.resize(size_t(std::max(count, 0)));
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const cublasLtMatmulHeuristicResult_t &r) {
                                 return r.state != CUBLAS_STATUS_SUCCESS;
                               }),
                results.end());
  return Status::ok();
}

Status MatmulKernel::chooseAlgorithm(const LaunchContext &context,
                                     cublasLtMatmulDesc_t desc,
                                     uint32_t alignment,
                                     cublasLtMatmulAlgo_t &algo, bool &found) {
  std::vector<cublasLtMatmulHeuristicResult_t> results;
  if (Status s = heuristics(context, desc, alignment, 1, results); !s)
    return s;
  found = !results.empty();
  if (found)
    algo = results[0].algo;
  return Status::ok();
}

Status MatmulKernel::createDesc(cublasLtMatmulDesc_t &desc, bool transA,
                                bool transB) {
  LOOM_CUBLAS(cublasLtMatmulDescCreate(&desc, compute_, scaleType_),
              "creating the matmul descriptor");
  // cuBLASLt's A is our B, its B our A (see the file comment).
  cublasOperation_t opLtA = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opLtB = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &opLtA, sizeof(opLtA)),
              "setting transa");
  LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                             &opLtB, sizeof(opLtB)),
              "setting transb");
  return Status::ok();
}

/// cuBLASLt's name of `epilogue`, as the summary gives it.
static const char *epilogueName(cublasLtEpilogue_t epilogue) {
  switch (epilogue) {
  case CUBLASLT_EPILOGUE_BIAS:
    return "BIAS";
  case CUBLASLT_EPILOGUE_GELU:
    return "GELU";
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    return "GELU_BIAS";
  case CUBLASLT_EPILOGUE_GELU_AUX:
    return "GELU_AUX";
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    return "GELU_AUX_BIAS";
  case CUBLASLT_EPILOGUE_DGELU:
    return "DGELU";
  case CUBLASLT_EPILOGUE_BGRADA:
    return "BGRADA";
  case CUBLASLT_EPILOGUE_BGRADB:
    return "BGRADB";
  default:
    return "another";
  }
}

/// A stand-in for the bias and aux pointers while the algorithm is chosen:
/// cuBLASLt reads their alignment from them, and launchFused only runs with
/// 16-byte aligned ones.
static void *const kAlignedPlaceholder = reinterpret_cast<void *>(16);

Status MatmulKernel::prepareEpilogue(const LaunchContext &context, int64_t n,
                                     bool transA, bool transB) {
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  // A GELU gradient or a bias gradient has no activation (the plan check
  // rejects one).
  if (geluGrad_) {
    // cuBLASLt's DGELU is an approximation: on an H200 an f32 result was
    // off by up to 0.7% (a fast tanh, presumably), far outside f32 training
    // parity, but within a bf16 result's rounding. The own kernel computes
    // the CPU's derivative.
    if (outType_ != CUDA_R_16BF) {
      epilogueChoice_ = "own: f32 DGELU is approximate";
      return Status::ok();
    }
    if (n % 8 != 0) {
      epilogueChoice_ = "own: aux leading dimension";
      return Status::ok(); // the aux leading dimension must be a multiple of 8
    }
    epilogue = CUBLASLT_EPILOGUE_DGELU;
  }
  if (summed_ >= 0)
    epilogue =
        summed_ == 0 ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA;
  switch (activation_) {
  case MatmulActivation::None:
    break;
  case MatmulActivation::Relu:
    if (!bias_) {
      epilogueChoice_ = "own: ReLU";
      return Status::ok(); // nothing cuBLASLt's BIAS would do
    }
    break; // BIAS; the ReLU (and a kept input) in the own kernel
  case MatmulActivation::GeluTanh:
    if (pre_ && n % 8 != 0) {
      epilogueChoice_ = "own: aux leading dimension";
      return Status::ok(); // the aux leading dimension must be a multiple of 8
    }
    epilogue =
        pre_ ? (bias_ ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                      : CUBLASLT_EPILOGUE_GELU_AUX)
             : (bias_ ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    break;
  }
  if (Status s = createDesc(d_.epilogue, transA, transB); !s)
    return s;
  LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(d_.epilogue,
                                             CUBLASLT_MATMUL_DESC_EPILOGUE,
                                             &epilogue, sizeof(epilogue)),
              "setting the epilogue");
  // The bias has the result's type (f32 for an f32 result of bf16 operands).
  int32_t dataType = outType_;
  if (bias_ || summed_ >= 0) {
    LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(
                    d_.epilogue, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dataType,
                    sizeof(dataType)),
                "setting the bias type");
    LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(
                    d_.epilogue, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &kAlignedPlaceholder, sizeof(kAlignedPlaceholder)),
                "setting the bias pointer");
  }
  if ((pre_ && activation_ == MatmulActivation::GeluTanh) || geluGrad_) {
    // The aux type defaults to the output's.
    int64_t ld = n;
    LOOM_CUBLAS(
        cublasLtMatmulDescSetAttribute(
            d_.epilogue, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
        "setting the preactivation leading dimension");
    LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(
                    d_.epilogue, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                    &kAlignedPlaceholder, sizeof(kAlignedPlaceholder)),
                "setting the preactivation pointer");
  }
  if (Status s = chooseAlgorithm(context, d_.epilogue, 16, epilogueAlgo_,
                                 haveEpilogueAlgo_);
      !s)
    return s;
  epilogueChoice_ = !haveEpilogueAlgo_ ? "own: no cuBLASLt algorithm"
                    : activation_ == MatmulActivation::Relu
                        ? "BIAS + own ReLU"
                        : epilogueName(epilogue);
  return Status::ok();
}

std::string MatmulKernel::epilogueChoice() const { return epilogueChoice_; }

Status MatmulKernel::prepare(const LaunchContext &context,
                             const Instruction &inst) {
  const TensorRef &a = inst.inputs[0], &b = inst.inputs[1],
                  &c = inst.outputs[0];
  const bool transA = intAttr(inst.attrs, "transpose_lhs") != 0;
  const bool transB = intAttr(inst.attrs, "transpose_rhs") != 0;
  cublasComputeType_t &compute = compute_;
  cudaDataType_t &scaleType = scaleType_;
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
  dtype_ = a.dtype;
  outDtype_ = c.dtype;
  outElementSize_ = dtypeSize(c.dtype);
  outType_ = c.dtype == a.dtype ? type_ : CUDA_R_32F; // the CPU check allows
                                                      // only bf16 -> f32
  addend_ = intAttr(inst.attrs, "accumulate") != 0;
  // A GELU gradient's third input is the GELU's input, not a bias.
  geluGrad_ = wordAttr(inst.attrs, "activation_grad", "none") == "gelu_tanh";
  bias_ = !geluGrad_ && inst.inputs.size() == (addend_ ? 4u : 3u);
  const std::string summed = wordAttr(inst.attrs, "bias_grad", "none");
  summed_ = summed == "lhs" ? 0 : summed == "rhs" ? 1 : -1;
  pre_ = inst.outputs.size() == 2 && summed_ < 0;
  const std::string activation = wordAttr(inst.attrs, "activation", "none");
  activation_ = activation == "relu"        ? MatmulActivation::Relu
                : activation == "gelu_tanh" ? MatmulActivation::GeluTanh
                                            : MatmulActivation::None;

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
  rows_ = batchC * m;
  n_ = n;
  // op(A) is [M, K], stored [K, M] when transposed; op(B) [K, N], stored
  // [K, N] unless transposed (bias gradients are single GEMMs).
  k_ = k;
  sumLength_ = summed_ == 0 ? m : n;
  kMajor_ = summed_ == 0 ? transA : !transB;
  workspaceBytes_ = context.workspaceBytes;
  for (const TensorRef &input : inst.inputs)
    inputBytes_.push_back(input.bytes());
  for (const TensorRef &output : inst.outputs)
    outputBytes_.push_back(output.bytes());
  // The inputs an output overlaps in the plan (weights by id), which tuning
  // keeps aside.
  std::vector<Span> written;
  for (const TensorRef &output : inst.outputs)
    written.push_back(spanByWeightId(output));
  for (const TensorRef &input : inst.inputs)
    if (anyOverlap({spanByWeightId(input)}, written))
      keptBytes_ += alignScratch(input.bytes());
  if (batchC == 0 || m == 0 || n == 0)
    return Status::ok(); // nothing to compute: calls_ = 0
  if (k == 0) {
    zeroBytes_ = c.bytes();
    if (hasEpilogue())
      epilogueChoice_ = "own: k = 0";
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
  problemKey_ =
      std::string(dtypeName(dtype_)) + "->" + dtypeName(outDtype_) +
      (compute_ == CUBLAS_COMPUTE_32F_FAST_TF32 ? " tf32" : "") +
      " m=" + std::to_string(rowsM) + " n=" + std::to_string(n) +
      " k=" + std::to_string(k) + " t=" + std::to_string(transA) +
      std::to_string(transB) + " calls=" + std::to_string(calls_) + "x" +
      std::to_string(perCall_) + " batches=" + std::to_string(batchA_) + "," +
      std::to_string(batchB_) + " bias=" + std::to_string(bias_) +
      " pre=" + std::to_string(pre_) + " summed=" + std::to_string(summed_) +
      " activation=" + std::to_string(int(activation_)) +
      " gelu_grad=" + std::to_string(geluGrad_) +
      " addend=" + std::to_string(addend_);
  auto strideOf = [&](int64_t batch, int64_t size) {
    return batch == 1 ? int64_t(0) : size;
  };

  if (Status s = createDesc(d_.matmul, transA, transB); !s)
    return s;
  // Our B, row-major [K, N] (or [N, K] transposed): column-major N x K with
  // ld N (or K x N with ld K).
  if (Status s = transB ? layout(d_.a, type_, uint64_t(k), uint64_t(n), k,
                                 perCall_, strideOf(batchB_, sizeB_))
                        : layout(d_.a, type_, uint64_t(n), uint64_t(k), n,
                                 perCall_, strideOf(batchB_, sizeB_));
      !s)
    return s;
  // Our A, row-major [M, K] (or [K, M]): column-major K x M with ld K (or
  // M x K with ld M).
  if (Status s = transA ? layout(d_.b, type_, uint64_t(rowsM), uint64_t(k),
                                 rowsM, perCall_, strideOf(batchA_, sizeA_))
                        : layout(d_.b, type_, uint64_t(k), uint64_t(rowsM), k,
                                 perCall_, strideOf(batchA_, sizeA_));
      !s)
    return s;
  // C (and D): column-major N x M, ld N.
  if (Status s = layout(d_.c, outType_, uint64_t(n), uint64_t(rowsM), n,
                        perCall_, sizeC_);
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
  bool stridesAligned = (sizeC_ * int64_t(outElementSize_)) % 16 == 0;
  for (int64_t stride : {strideOf(batchA_, sizeA_), strideOf(batchB_, sizeB_)})
    stridesAligned =
        stridesAligned && (stride * int64_t(elementSize_)) % 16 == 0;
  if (perCall_ == 1)
    stridesAligned = true;
  if (stridesAligned)
    if (Status s =
            chooseAlgorithm(context, d_.matmul, 16, aligned_, haveAligned_);
        !s)
      return s;
  bool haveUnaligned = false;
  if (Status s = chooseAlgorithm(context, d_.matmul, uint32_t(elementSize_),
                                 unaligned_, haveUnaligned);
      !s)
    return s;
  if (!haveUnaligned)
    return Status::error(
        "matmul: cuBLASLt has no algorithm for " +
        std::string(dtypeName(a.dtype)) + " lhs " + shapeString(a.shape) +
        ", rhs " + shapeString(b.shape) + " with " +
        std::to_string(context.workspaceBytes) + " bytes of workspace");
  // cuBLASLt's epilogues take one bias (and aux) for the whole call: only a
  // single GEMM uses them.
  // f64 keeps the own kernel, whose activations are the CPU's f64 formulas.
  // An epilogue cuBLASLt refuses with an error rather than "not supported"
  // is left to the own kernel too.
  if (!hasEpilogue())
    return Status::ok();
  if (calls_ != 1 || perCall_ != 1)
    epilogueChoice_ = "own: batched";
  else if (dtype_ == DType::F64)
    epilogueChoice_ = "own: f64";
  else if (Status s = prepareEpilogue(context, n, transA, transB); !s) {
    haveEpilogueAlgo_ = false;
    epilogueChoice_ = "own: refused";
  }
  return Status::ok();
}

/// Whether every pointer of `ops` is 16-byte aligned (null ones are).
static bool allAligned16(const MatmulOperands &ops) {
  uintptr_t addresses = reinterpret_cast<uintptr_t>(ops.a) |
                        reinterpret_cast<uintptr_t>(ops.b) |
                        reinterpret_cast<uintptr_t>(ops.c) |
                        reinterpret_cast<uintptr_t>(ops.bias) |
                        reinterpret_cast<uintptr_t>(ops.pre) |
                        reinterpret_cast<uintptr_t>(ops.addend) |
                        reinterpret_cast<uintptr_t>(ops.geluInput);
  return addresses % 16 == 0;
}

StatusOr<bool> MatmulKernel::launchFused(const LaunchContext &context,
                                         const MatmulOperands &ops) {
  if (!allAligned16(ops))
    return false;
  if (bias_ || summed_ >= 0)
    LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(
                    d_.epilogue, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ops.bias,
                    sizeof(ops.bias)),
                "setting the bias pointer");
  // The aux: the preactivation GELU_AUX stores, or the GELU input DGELU
  // reads.
  const void *aux = geluGrad_ ? ops.geluInput : ops.pre;
  if ((pre_ && activation_ == MatmulActivation::GeluTanh) || geluGrad_)
    LOOM_CUBLAS(cublasLtMatmulDescSetAttribute(
                    d_.epilogue, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                    &aux, sizeof(aux)),
                "setting the aux pointer");
  const void *one = scale(oneF_, oneD_), *zero = scale(zeroF_, zeroD_);
  LOOM_CUBLAS(cublasLtMatmul(context.lt, d_.epilogue, one, ops.b, d_.a, ops.a,
                             d_.b, ops.addend ? one : zero,
                             ops.addend ? ops.addend : ops.c, d_.c, ops.c, d_.c,
                             &epilogueAlgo_, context.workspace, workspaceBytes_,
                             context.stream),
              "cublasLtMatmul with an epilogue");
  return true;
}

MatmulOperands MatmulKernel::operands(const void *const *inputs,
                                      void *const *outputs) const {
  MatmulOperands ops;
  ops.a = static_cast<const char *>(inputs[0]);
  ops.b = static_cast<const char *>(inputs[1]);
  ops.c = static_cast<char *>(outputs[0]);
  ops.bias = summed_ >= 0 ? outputs[1] : bias_ ? inputs[2] : nullptr;
  ops.pre = pre_ ? outputs[1] : nullptr;
  ops.geluInput = geluGrad_ ? inputs[2] : nullptr;
  ops.addend =
      addend_ ? static_cast<const char *>(inputs[bias_ ? 3 : 2]) : nullptr;
  return ops;
}

bool MatmulKernel::callAligned(const MatmulOperands &ops, int64_t call) const {
  if (!haveAligned_)
    return false;
  const int64_t first = call * perCall_;
  const size_t e = elementSize_;
  // Each operand's first batch of this call (the call's batches then
  // advance by the operand's stride: perCall_ divides every batch count
  // larger than 1).
  const char *pa = ops.a + (batchA_ == 1 ? 0 : first % batchA_) * sizeA_ * e;
  const char *pb = ops.b + (batchB_ == 1 ? 0 : first % batchB_) * sizeB_ * e;
  const char *pc = ops.c + first * sizeC_ * outElementSize_;
  const char *pin =
      ops.addend ? ops.addend + first * sizeC_ * outElementSize_ : pc;
  return (reinterpret_cast<uintptr_t>(pa) | reinterpret_cast<uintptr_t>(pb) |
          reinterpret_cast<uintptr_t>(pc) | reinterpret_cast<uintptr_t>(pin)) %
             16 ==
         0;
}

MatmulKernel::Slot MatmulKernel::slotFor(const MatmulOperands &ops) {
  if (haveEpilogueAlgo_ && allAligned16(ops))
    return {&epilogueAlgo_, d_.epilogue, 16, " epilogue"};
  // A launch whose calls differ in alignment is tuned for its first.
  if (callAligned(ops, 0))
    return {&aligned_, d_.matmul, 16, " aligned"};
  return {&unaligned_, d_.matmul, uint32_t(elementSize_), " unaligned"};
}

Status MatmulKernel::launchProducts(const LaunchContext &context,
                                    const MatmulOperands &ops, bool &fused) {
  fused = false;
  if (haveEpilogueAlgo_) {
    StatusOr<bool> launched = launchFused(context, ops);
    if (!launched.isOk())
      return launched.status();
    fused = *launched;
    if (fused)
      return Status::ok();
  }
  const void *one = scale(oneF_, oneD_), *zero = scale(zeroF_, zeroD_);
  const size_t e = elementSize_;
  for (int64_t call = 0; call < calls_; ++call) {
    const int64_t first = call * perCall_;
    const char *pa = ops.a + (batchA_ == 1 ? 0 : first % batchA_) * sizeA_ * e;
    const char *pb = ops.b + (batchB_ == 1 ? 0 : first % batchB_) * sizeB_ * e;
    char *pc = ops.c + first * sizeC_ * outElementSize_;
    // The addend is read as C (beta = 1) and the sum written to D.
    const char *pin =
        ops.addend ? ops.addend + first * sizeC_ * outElementSize_ : pc;
    const cublasLtMatmulAlgo_t *algo =
        callAligned(ops, call) ? &aligned_ : &unaligned_;
    LOOM_CUBLAS(cublasLtMatmul(context.lt, d_.matmul, one, pb, d_.a, pa, d_.b,
                               ops.addend ? one : zero, pin, d_.c, pc, d_.c,
                               algo, context.workspace, workspaceBytes_,
                               context.stream),
                "cublasLtMatmul");
  }
  return Status::ok();
}

Status MatmulKernel::launch(const LaunchContext &context,
                            const void *const *inputs, void *const *outputs) {
  const MatmulOperands ops = operands(inputs, outputs);
  auto ownEpilogue = [&] {
    if (summed_ >= 0)
      return launchOperandSum(context.stream, dtype_, inputs[summed_],
                              outputs[1], k_, sumLength_, kMajor_);
    if (!hasEpilogue())
      return Status::ok();
    if (geluGrad_)
      return launchMatmulGeluGrad(context.stream, outDtype_, ops.c,
                                  ops.geluInput, rows_ * n_);
    return launchMatmulEpilogue(context.stream, outDtype_, ops.c, ops.bias,
                                ops.pre, rows_, n_, activation_);
  };
  if (zeroBytes_) {
    // The product of nothing is zeros, or the addend.
    Status s =
        ops.addend
            ? cudaStatus(cudaMemcpyAsync(ops.c, ops.addend, zeroBytes_,
                                         cudaMemcpyDeviceToDevice,
                                         context.stream),
                         "matmul (k = 0)")
            : cudaStatus(cudaMemsetAsync(ops.c, 0, zeroBytes_, context.stream),
                         "matmul (k = 0)");
    if (!s)
      return s;
    return ownEpilogue(); // the bias and activation of that
  }
  if (calls_ == 0)
    return ownEpilogue(); // a bias gradient may still have entries
  if (context.workspaceBytes < workspaceBytes_)
    return Status::error("matmul: prepared for " +
                         std::to_string(workspaceBytes_) +
                         " bytes of workspace, launched with " +
                         std::to_string(context.workspaceBytes));
  bool fused = false;
  if (Status s = launchProducts(context, ops, fused); !s)
    return s;
  if (fused)
    return activation_ == MatmulActivation::Relu
               ? launchMatmulEpilogue(context.stream, outDtype_, ops.c, nullptr,
                                      ops.pre, rows_, n_, activation_)
               : Status::ok();
  return ownEpilogue();
}

KernelOr cuda::createMatmul(const LaunchContext &context,
                            const Instruction &inst) {
  auto kernel = std::make_unique<MatmulKernel>();
  if (Status s = kernel->prepare(context, inst); !s)
    return s;
  return KernelPtr(std::move(kernel));
}
