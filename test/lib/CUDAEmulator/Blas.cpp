//===- Blas.cpp - The cuBLASLt calls of the matmul kernel, on the host ----===//
//
// A reference implementation of the part of cuBLASLt that Gemm.cpp uses,
// written from cuBLASLt's documentation, so that the matmul kernel's
// descriptors, batching and epilogue choices run in the emulator:
//   - layouts are column-major (element (i, j) at i + j * ld), with a batch
//     count and a strided batch offset in elements;
//   - D = alpha op(A) op(B) + beta C per batch, accumulated in the compute
//     type (TF32 rounds the operands to 10 mantissa bits first);
//   - epilogues: BIAS adds a vector of D's row count along the rows, the
//     GELU ones apply the tanh form, the AUX ones store the input of the
//     GELU (D's type, leading dimension EPILOGUE_AUX_LD) first; DGELU
//     multiplies by the tanh GELU's derivative at the aux it reads (D's
//     type, EPILOGUE_AUX_LD), unbatched only; BGRADA
//     (BGRADB) stores the sum of op(A) (op(B)) over K, one value per row
//     (column) of D, in C's type at the bias pointer, accumulated in the
//     compute type; unbatched only.
// It checks what cuBLASLt documents as invalid: shapes that do not chain,
// a leading dimension below the row count, batch counts that differ, an
// auxiliary leading dimension not a multiple of 8, and pointers less
// aligned than the algorithm was chosen for.
//
// The heuristic offers kAlgorithms algorithms, best first, which compute
// the same: what tells them apart is their number (in the algorithm's
// opaque data). For tests of matmul tuning, LOOM_EMULATOR_SLOW_ALGORITHM=N
// makes algorithm N take kSlowSeconds longer on the stream, and
// LOOM_EMULATOR_STATS counts the matmuls that ran it;
// LOOM_EMULATOR_REFUSED_ALGORITHM=N makes cublasLtMatmul refuse algorithm N
// (CUBLAS_STATUS_NOT_SUPPORTED), as cuBLASLt may refuse a heuristic's
// candidate at launch. LOOM_EMULATOR_NO_EPILOGUES=1 makes the heuristic
// offer no algorithm for any epilogue, as a cuBLASLt without them would, so
// that whole plans run on the matmul kernel's own epilogue kernels.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt::cuda;

namespace {

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1;
  void *aux = nullptr;
  int64_t auxLd = 0;
};

/// The algorithms the heuristic offers, and what the slow one costs.
constexpr int kAlgorithms = 3;
constexpr double kSlowSeconds = 0.01;

/// The algorithm an environment variable names, -1 when it is not set.
int algorithmFromEnvironment(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? std::atoi(value) : -1;
}

/// LOOM_EMULATOR_SLOW_ALGORITHM's and LOOM_EMULATOR_REFUSED_ALGORITHM's.
int slowAlgorithm() {
  static const int slow =
      algorithmFromEnvironment("LOOM_EMULATOR_SLOW_ALGORITHM");
  return slow;
}
int refusedAlgorithm() {
  static const int refused =
      algorithmFromEnvironment("LOOM_EMULATOR_REFUSED_ALGORITHM");
  return refused;
}

/// LOOM_EMULATOR_NO_EPILOGUES's: set, and neither empty nor "0".
bool noEpilogues() {
  static const bool none = [] {
    const char *value = std::getenv("LOOM_EMULATOR_NO_EPILOGUES");
    return value && *value && std::string(value) != "0";
  }();
  return none;
}

struct Preference {
  uint32_t alignment = 256; // cuBLASLt's default minimum
};

template <typename T, typename Handle> T &as(Handle handle) {
  return *reinterpret_cast<T *>(handle);
}

template <typename V> bool read(V &value, const void *buf, size_t size) {
  if (size != sizeof(V))
    return false;
  std::memcpy(&value, buf, sizeof(V));
  return true;
}

double load(cudaDataType type, const void *base, int64_t index) {
  switch (type) {
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  case CUDA_R_64F:
    return static_cast<const double *>(base)[index];
  default:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]);
  }
}

void store(cudaDataType type, void *base, int64_t index, double value) {
  switch (type) {
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = float(value);
    return;
  case CUDA_R_64F:
    static_cast<double *>(base)[index] = value;
    return;
  default:
    static_cast<__nv_bfloat16 *>(base)[index] =
        __float2bfloat16_rn(float(value));
  }
}

bool supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_64F || type == CUDA_R_16BF;
}

/// An f32 rounded to TF32 (10 mantissa bits, to nearest even).
float tf32(float x) {
  if (!std::isfinite(x))
    return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

bool hasBias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool hasGelu(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool hasBiasGrad(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
/// Whether the epilogue stores an aux matrix (the GELU's input).
bool hasAux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
/// Whether it reads one (the GELU's input, for its derivative).
bool readsAux(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_DGELU; }

/// d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), in f32.
float geluTanhDerivative(float x) {
  const float k = 0.7978845608028654f;
  const float t = std::tanh(k * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

/// Whether the operation is one cuBLASLt accepts (see the file comment).
cublasStatus_t validate(const MatmulDesc &d, const Layout &a, const Layout &b,
                        const Layout &c, const Layout &out) {
  for (const Layout *l : {&a, &b, &c, &out})
    if (!supported(l->type) || l->ld < int64_t(l->rows) ||
        l->batch != out.batch)
      return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t m = d.transA == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t k = d.transA == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t kb = d.transB == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t n = d.transB == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || out.rows != m || out.cols != n || c.rows != m || c.cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (d.epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    break;
  case CUBLASLT_EPILOGUE_BGRADA:
  case CUBLASLT_EPILOGUE_BGRADB:
    if (out.batch != 1 || (d.biasType != -1 && d.biasType != c.type))
      return CUBLAS_STATUS_NOT_SUPPORTED;
    break;
  case CUBLASLT_EPILOGUE_DGELU:
    if (out.batch != 1)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if ((hasAux(d.epilogue) || readsAux(d.epilogue)) &&
      (d.auxLd < int64_t(m) || d.auxLd % 8 != 0))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (hasBias(d.epilogue) && d.biasType != -1 && d.biasType != out.type &&
      d.biasType != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

bool aligned(const void *p, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

/// D = alpha op(A) op(B) + beta C and the epilogue, as validated.
void multiply(const MatmulDesc &d, const Layout &a, const Layout &b,
              const Layout &c, const Layout &out, double alphaValue,
              const void *A, const void *B, double betaValue, const void *C,
              void *D) {
  const bool wide = d.compute == CUBLAS_COMPUTE_64F;
  const bool tf32Inputs = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const int64_t m = int64_t(out.rows), n = int64_t(out.cols);
  const int64_t k = int64_t(d.transA == CUBLAS_OP_N ? a.cols : a.rows);
  const cudaDataType biasType =
      d.biasType == -1 ? out.type : cudaDataType(d.biasType);
  auto operand = [&](const Layout &l, const void *base, int64_t batch,
                     bool transposed, int64_t row, int64_t col) {
    const int64_t index =
        batch * l.stride + (transposed ? col + row * l.ld : row + col * l.ld);
    double v = load(l.type, base, index);
    return tf32Inputs ? double(tf32(float(v))) : v;
  };
  for (int64_t batch = 0; batch < out.batch; ++batch)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double value;
        if (wide) {
          double sum = 0;
          for (int64_t t = 0; t < k; ++t)
            sum += operand(a, A, batch, d.transA != CUBLAS_OP_N, i, t) *
                   operand(b, B, batch, d.transB != CUBLAS_OP_N, t, j);
          value = sum;
        } else {
          float sum = 0;
          for (int64_t t = 0; t < k; ++t)
            sum += float(operand(a, A, batch, d.transA != CUBLAS_OP_N, i, t)) *
                   float(operand(b, B, batch, d.transB != CUBLAS_OP_N, t, j));
          value = sum;
        }
        value *= alphaValue;
        if (betaValue != 0)
          value += betaValue * load(c.type, C, batch * c.stride + i + j * c.ld);
        if (hasBias(d.epilogue))
          value += load(biasType, d.bias, i);
        if (!wide)
          value = float(value);
        if (hasAux(d.epilogue))
          store(out.type, d.aux, i + j * d.auxLd, value);
        if (hasGelu(d.epilogue)) {
          const float x = float(value);
          value = 0.5f * x *
                  (1.0f + std::tanh(0.7978845608028654f *
                                    (x + 0.044715f * x * x * x)));
        }
        if (readsAux(d.epilogue))
          value =
              float(value) *
              geluTanhDerivative(float(load(out.type, d.aux, i + j * d.auxLd)));
        store(out.type, D, batch * out.stride + i + j * out.ld, value);
      }
  if (!hasBiasGrad(d.epilogue))
    return;
  // One value per row of D (op(A) summed) or per column (op(B) summed).
  const bool ofA = d.epilogue == CUBLASLT_EPILOGUE_BGRADA;
  for (int64_t v = 0; v < (ofA ? m : n); ++v) {
    double wideSum = 0;
    float sum = 0;
    for (int64_t t = 0; t < k; ++t) {
      double x = ofA ? operand(a, A, 0, d.transA != CUBLAS_OP_N, v, t)
                     : operand(b, B, 0, d.transB != CUBLAS_OP_N, t, v);
      wideSum += x;
      sum += float(x);
    }
    store(c.type, const_cast<void *>(d.bias), v, wide ? wideSum : double(sum));
  }
}

} // namespace

extern "C" {

// A handle carries no state here.
size_t cublasLtGetVersion(void) { return 130000; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  static int token;
  *handle = reinterpret_cast<cublasLtHandle_t>(&token);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) {
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

const char *cublasLtGetStatusString(cublasStatus_t) {
  return "the emulator's cuBLASLt rejected the call";
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete &as<Layout>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *buf, size_t size) {
  Layout &l = as<Layout>(layout);
  bool ok = false;
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
    ok = read(l.batch, buf, size) && l.batch >= 1;
  else if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
    ok = read(l.stride, buf, size);
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  auto *d = new MatmulDesc;
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete &as<MatmulDesc>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *buf, size_t size) {
  MatmulDesc &d = as<MatmulDesc>(desc);
  bool ok = false;
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    ok = read(d.transA, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    ok = read(d.transB, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    ok = read(d.epilogue, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    ok = read(d.bias, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    ok = read(d.biasType, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    ok = read(d.aux, buf, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    ok = read(d.auxLd, buf, size);
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete &as<Preference>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *buf,
    size_t size) {
  Preference &pref = as<Preference>(p);
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: {
    uint64_t bytes;
    return read(bytes, buf, size) ? CUBLAS_STATUS_SUCCESS
                                  : CUBLAS_STATUS_INVALID_VALUE;
  }
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
    uint32_t bytes;
    if (!read(bytes, buf, size) || bytes == 0)
      return CUBLAS_STATUS_INVALID_VALUE;
    // The algorithm may assume the least alignment any operand promises.
    pref.alignment = std::min(pref.alignment, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// One algorithm, recording the alignment its operands must have (the least
// the preference promised, and the bias and aux pointers' when set).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t out, cublasLtMatmulPreference_t preference,
    int requested, cublasLtMatmulHeuristicResult_t results[], int *count) {
  *count = 0;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDesc &d = as<MatmulDesc>(desc);
  if (cublasStatus_t s = validate(d, as<Layout>(a), as<Layout>(b),
                                  as<Layout>(c), as<Layout>(out)))
    return s;
  if (noEpilogues() && d.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  uint32_t alignment = as<Preference>(preference).alignment;
  const int offered = std::min(requested, kAlgorithms);
  for (int i = 0; i < offered; ++i) {
    std::memset(&results[i], 0, sizeof results[i]);
    results[i].algo.data[0] = alignment;
    results[i].algo.data[1] = uint64_t(i);
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1;
  }
  *count = offered;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t aDesc, const void *B,
                              cublasLtMatrixLayout_t bDesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cDesc,
                              void *D, cublasLtMatrixLayout_t dDesc,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  // The descriptors and scalars are read now; the operands when the
  // product runs on the stream.
  const MatmulDesc d = as<MatmulDesc>(desc);
  const Layout a = as<Layout>(aDesc), b = as<Layout>(bDesc),
               c = as<Layout>(cDesc), out = as<Layout>(dDesc);
  if (cublasStatus_t s = validate(d, a, b, c, out))
    return s;
  const uint32_t alignment = algo ? uint32_t(algo->data[0]) : 1;
  if (algo && int64_t(algo->data[1]) == refusedAlgorithm())
    return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const void *p : {A, B, C, static_cast<const void *>(D)})
    if (!aligned(p, alignment))
      return CUBLAS_STATUS_INVALID_VALUE;
  if ((hasBias(d.epilogue) || hasBiasGrad(d.epilogue)) &&
      (!d.bias || !aligned(d.bias, 16)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if ((hasAux(d.epilogue) || readsAux(d.epilogue)) &&
      (!d.aux || !aligned(d.aux, 16)))
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool wide = d.compute == CUBLAS_COMPUTE_64F;
  const double alphaValue = wide ? *static_cast<const double *>(alpha)
                                 : *static_cast<const float *>(alpha);
  const double betaValue = wide ? *static_cast<const double *>(beta)
                                : *static_cast<const float *>(beta);
  emulator::count(emulator::Call::Matmul);
  const bool slow = algo && int64_t(algo->data[1]) == slowAlgorithm();
  if (slow)
    emulator::count(emulator::Call::SlowMatmul);
  cudaError_t error = emulator::enqueue(stream, [=] {
    if (slow)
      std::this_thread::sleep_for(std::chrono::duration<double>(kSlowSeconds));
    multiply(d, a, b, c, out, alphaValue, A, B, betaValue, C, D);
  });
  return error ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
