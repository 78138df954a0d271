//===- Gemm.cpp - The CPU matmul kernel -----------------------------------===//
//
// `matmul`: C[b..., M, N] = op(A)[b..., M, K] * op(B)[b..., K, N], where op
// swaps the trailing two dims when transpose_lhs / transpose_rhs is 1 and the
// batch dims of A and B are suffixes of C's (an operand with fewer batch dims
// is shared by the batches it lacks).
//
// GEMMs go to OpenBLAS when it is available, else to a portable blocked loop.
// Threading policy:
//  - a linear layer (A not transposed, B shared by every batch) folds all
//    batches into M and issues one GEMM, which OpenBLAS threads itself;
//  - many small batched GEMMs (attention: 96 GEMMs of 128x64x128) run in
//    parallel over batches with an OpenMP loop, OpenBLAS forced to one thread
//    inside (its own threads would serialize on its lock and oversubscribe the
//    cores);
//  - few or large batched GEMMs run one after the other, each threaded by
//    OpenBLAS.
//
// Epilogue (optional): a third input, the bias, is added along N, then the
// `activation` (relu, gelu_tanh) is applied; a second output receives the
// value before the activation. With `accumulate=1` the last input, of the
// result's shape and dtype, is added after the bias (a residual; no
// activation then). It runs on the f32 (f64) result before it is rounded
// to its dtype, as cuBLASLt's epilogues do, so a bf16 result is rounded
// once; bf16 operands may have an f32 result (bias and addend f32 too),
// which is not rounded to bf16 at all.
//
// Activation gradient (optional, `activation_grad=gelu_tanh`, the input
// gradient of a linear layer that a tanh GELU feeds): a third input X of
// C's shape and dtype, and C = (op(A) op(B)) * gelu'(X), the product
// multiplied in f32 (f64) before it is rounded (cuBLASLt's DGELU).
//
// Bias gradient (optional, `bias_grad` = lhs or rhs, no bias input, no
// activation): a second output receives the sum of op(A) over K (a vector
// of M) or of op(B) over K (a vector of N), what cuBLASLt's BGRADB and
// BGRADA epilogues store for the weight-gradient GEMM of a linear layer.
// It sums in f64 and rounds to the result's dtype once.
//
// bf16 GEMMs (A, B and C bf16) compute in f32: operands are widened to f32
// a block at a time, multiplied by the f32 GEMM (so products accumulate in
// f32) and the result is rounded to nearest even on store. A linear layer
// widens B once and walks A in blocks of rows; batched GEMMs widen one
// batch's operands per thread.
//
//===----------------------------------------------------------------------===//

#include "BFloat16.h"
#include "CPUKernels.h"
#include "Scratch.h"

#include <cstring>
#include <mutex>
#include <type_traits>

#ifdef LOOM_HAVE_OPENBLAS
#include <cblas.h>
#endif

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

enum class Activation { None, Relu, GeluTanh };
enum class BiasGrad { None, Lhs, Rhs };

/// The validated geometry of one matmul instruction.
struct MatmulShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  /// Batches of C, and of A and B (each divides batchC).
  int64_t batchC = 1, batchA = 1, batchB = 1;
  /// The epilogue: a bias input, the activation, a preactivation output,
  /// an addend input (`accumulate`).
  bool bias = false, preactivation = false, addend = false;
  Activation activation = Activation::None;
  /// C is multiplied by the tanh GELU's derivative at the third input.
  bool geluGrad = false;
  /// The operand whose sum over K the second output receives, if any.
  BiasGrad biasGrad = BiasGrad::None;
  /// bf16 operands, f32 result.
  bool widened = false;
  bool hasEpilogue() const {
    return bias || addend || activation != Activation::None || geluGrad;
  }
};

/// The bias gradient output of a weight-gradient GEMM (`bias_grad`).
Status readBiasGrad(const Instruction &instruction, const std::string &operand,
                    MatmulShape &shape) {
  if (operand != "lhs" && operand != "rhs")
    return Status::error("unknown bias_grad operand '" + operand +
                         "' (known: lhs, rhs)");
  shape.biasGrad = operand == "lhs" ? BiasGrad::Lhs : BiasGrad::Rhs;
  if (shape.activation != Activation::None || instruction.inputs.size() != 2 ||
      instruction.outputs.size() != 2)
    return Status::error("bias_grad takes 2 inputs (lhs, rhs), 2 outputs "
                         "(result, bias gradient) and no activation");
  const TensorRef &c = instruction.outputs[0], &sum = instruction.outputs[1];
  if (instruction.inputs[0].shape.size() != 2 ||
      instruction.inputs[1].shape.size() != 2)
    return Status::error(
        "bias_grad needs one GEMM: lhs " +
        shapeString(instruction.inputs[0].shape) + " and rhs " +
        shapeString(instruction.inputs[1].shape) + " must be matrices");
  if (Status s = expectSameDType(c, "result", sum, "bias gradient"); !s)
    return s;
  int64_t length = shape.biasGrad == BiasGrad::Lhs ? shape.m : shape.n;
  if (sum.shape != std::vector<int64_t>{length})
    return Status::error(
        "bias gradient " + shapeString(sum.shape) +
        " must be a vector of the " + std::to_string(length) + " " +
        (shape.biasGrad == BiasGrad::Lhs ? "rows" : "columns") +
        " of the result");
  return Status::ok();
}

/// The GELU gradient of an input-gradient GEMM (`activation_grad`).
Status readActivationGrad(const Instruction &instruction,
                          const std::string &activation, MatmulShape &shape) {
  if (activation != "gelu_tanh")
    return Status::error("unknown activation_grad '" + activation +
                         "' (known: gelu_tanh)");
  shape.geluGrad = true;
  if (instruction.inputs.size() != 3 || instruction.outputs.size() != 1)
    return Status::error("activation_grad takes 3 inputs (lhs, rhs and the "
                         "activation's input) and 1 output");
  if (shape.activation != Activation::None)
    return Status::error("activation_grad takes no activation");
  if (shape.widened)
    return Status::error("activation_grad needs the operands' dtype for the "
                         "result, not an f32 result of bf16 operands");
  const TensorRef &c = instruction.outputs[0], &x = instruction.inputs[2];
  if (Status s = expectSameDType(c, "result", x, "activation input"); !s)
    return s;
  return expectSameShape(c, "result", x, "activation input");
}

Status readEpilogue(const Instruction &instruction, MatmulShape &shape) {
  std::string activation;
  if (Status s = getWordAttr(instruction.attrs, "activation", activation, false,
                             "none");
      !s)
    return s;
  if (activation == "relu")
    shape.activation = Activation::Relu;
  else if (activation == "gelu_tanh")
    shape.activation = Activation::GeluTanh;
  else if (activation != "none")
    return Status::error("unknown activation '" + activation +
                         "' (known: none, relu, gelu_tanh)");
  const TensorRef &c = instruction.outputs[0];
  std::string biasGrad;
  if (Status s =
          getWordAttr(instruction.attrs, "bias_grad", biasGrad, false, "none");
      !s)
    return s;
  int64_t accumulate;
  if (Status s =
          getIntAttr(instruction.attrs, "accumulate", accumulate, false, 0);
      !s)
    return s;
  if (accumulate != 0 && accumulate != 1)
    return Status::error("accumulate must be 0 or 1");
  std::string activationGrad;
  if (Status s = getWordAttr(instruction.attrs, "activation_grad",
                             activationGrad, false, "none");
      !s)
    return s;
  if (activationGrad != "none") {
    if (accumulate || biasGrad != "none")
      return Status::error("activation_grad takes no addend (accumulate=1) "
                           "and no bias_grad");
    return readActivationGrad(instruction, activationGrad, shape);
  }
  if (biasGrad != "none") {
    if (accumulate)
      return Status::error("bias_grad takes no addend (accumulate=1)");
    if (shape.widened)
      return Status::error("bias_grad needs the operands' dtype for the "
                           "result, not an f32 result of bf16 operands");
    return readBiasGrad(instruction, biasGrad, shape);
  }
  shape.addend = accumulate == 1;
  if (!shape.addend && instruction.inputs.size() == 4)
    return Status::error("4 inputs need accumulate=1 (lhs, rhs, bias and the "
                         "addend)");
  if (shape.addend) {
    if (instruction.inputs.size() < 3)
      return Status::error("accumulate=1 needs an addend input after lhs, "
                           "rhs (and the bias)");
    if (shape.activation != Activation::None)
      return Status::error("accumulate=1 takes no activation (the addend "
                           "would be added after it)");
    const TensorRef &addend = instruction.inputs.back();
    if (Status s = expectSameDType(c, "result", addend, "addend"); !s)
      return s;
    // The addend joins the f32 (f64) sum unrounded: a bf16 result would
    // round it (and the kernels keep no bf16 addend path).
    if (c.dtype == DType::BF16)
      return Status::error("accumulate=1 needs an f32 or f64 result, not bf16");
    if (Status s = expectSameShape(c, "result", addend, "addend"); !s)
      return s;
  }
  shape.bias = instruction.inputs.size() == (shape.addend ? 4u : 3u);
  if (shape.bias) {
    const TensorRef &bias = instruction.inputs[2];
    if (Status s = expectSameDType(c, "result", bias, "bias"); !s)
      return s;
    if (bias.shape != std::vector<int64_t>{c.shape.back()})
      return Status::error("bias " + shapeString(bias.shape) +
                           " must be a vector of the result's " +
                           std::to_string(c.shape.back()) + " columns");
  }
  shape.preactivation = instruction.outputs.size() == 2;
  if (shape.preactivation) {
    if (shape.activation == Activation::None)
      return Status::error("a preactivation output needs an activation");
    if (Status s = expectSameDType(c, "result", instruction.outputs[1],
                                   "preactivation");
        !s)
      return s;
    if (Status s = expectSameShape(c, "result", instruction.outputs[1],
                                   "preactivation");
        !s)
      return s;
  }
  return Status::ok();
}

Status readShape(const Instruction &instruction, MatmulShape &shape) {
  size_t inputs = instruction.inputs.size(),
         outputs = instruction.outputs.size();
  if (inputs < 2 || inputs > 4 || outputs < 1 || outputs > 2)
    return Status::error("expects 2 to 4 inputs (lhs, rhs, bias, addend) and "
                         "1 or 2 outputs (result, preactivation), got " +
                         std::to_string(inputs) + " and " +
                         std::to_string(outputs));
  if (Status s = expectKnownAttrs(
          instruction.attrs, {"transpose_lhs", "transpose_rhs", "activation",
                              "activation_grad", "bias_grad", "accumulate"});
      !s)
    return s;
  int64_t transA, transB;
  if (Status s = getIntAttr(instruction.attrs, "transpose_lhs", transA, false);
      !s)
    return s;
  if (Status s = getIntAttr(instruction.attrs, "transpose_rhs", transB, false);
      !s)
    return s;
  if ((transA != 0 && transA != 1) || (transB != 0 && transB != 1))
    return Status::error("transpose_lhs and transpose_rhs must be 0 or 1");
  shape.transA = transA;
  shape.transB = transB;

  const TensorRef &a = instruction.inputs[0], &b = instruction.inputs[1],
                  &c = instruction.outputs[0];
  if (Status s = expectFloatOrBF16(a.dtype, "lhs"); !s)
    return s;
  if (Status s = expectSameDType(a, "lhs", b, "rhs"); !s)
    return s;
  // bf16 operands may give an f32 result (never rounded to bf16).
  shape.widened = a.dtype == DType::BF16 && c.dtype == DType::F32;
  if (!shape.widened)
    if (Status s = expectSameDType(a, "lhs", c, "result"); !s)
      return s;
  if (a.shape.size() < 2 || b.shape.size() < 2 || c.shape.size() < 2)
    return Status::error("lhs " + shapeString(a.shape) + ", rhs " +
                         shapeString(b.shape) + " and result " +
                         shapeString(c.shape) + " must have rank >= 2");

  size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  int64_t m = transA ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transB ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = transB ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb)
    return Status::error("lhs " + shapeString(a.shape) + " and rhs " +
                         shapeString(b.shape) + " disagree on K (" +
                         std::to_string(ka) + " vs " + std::to_string(kb) +
                         ")");
  if (c.shape[rc - 2] != m || c.shape[rc - 1] != n)
    return Status::error("result " + shapeString(c.shape) + " should end in [" +
                         std::to_string(m) + "," + std::to_string(n) +
                         "] for lhs " + shapeString(a.shape) + " and rhs " +
                         shapeString(b.shape));
  // Batch dims of each operand must be a suffix of the result's.
  for (const auto &[ref, name] :
       {std::pair<const TensorRef *, const char *>{&a, "lhs"}, {&b, "rhs"}}) {
    size_t r = ref->shape.size();
    bool ok = r <= rc;
    for (size_t i = 0; ok && i + 2 < r; ++i)
      ok = ref->shape[i] == c.shape[rc - r + i];
    if (!ok)
      return Status::error(std::string(name) + " " + shapeString(ref->shape) +
                           " has batch dims that are not a suffix of the "
                           "result's " +
                           shapeString(c.shape));
  }
  shape.m = m;
  shape.n = n;
  shape.k = ka;
  shape.batchC = dimProduct(c.shape, 0, rc - 2);
  shape.batchA = dimProduct(a.shape, 0, ra - 2);
  shape.batchB = dimProduct(b.shape, 0, rb - 2);
  return readEpilogue(instruction, shape);
}

//===----------------------------------------------------------------------===//
// The epilogue, on rows of the f32 (f64) result
//===----------------------------------------------------------------------===//

/// The activations as the elementwise kernel computes them (f32 with its
/// fast math, f64 with libm), so a fused chain equals the unfused one.
inline float activate(Activation activation, float x) {
  switch (activation) {
  case Activation::Relu:
    return x < 0.0f ? 0.0f : x;
  case Activation::GeluTanh:
    return fast::geluTanh(x);
  case Activation::None:
    break;
  }
  return x;
}
inline double activate(Activation activation, double x) {
  switch (activation) {
  case Activation::Relu:
    return x < 0.0 ? 0.0 : x;
  case Activation::GeluTanh:
    return 0.5 * x *
           (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case Activation::None:
    break;
  }
  return x;
}

/// The tanh GELU's derivative (an `activation_grad` epilogue multiplies by
/// it), as the elementwise kernel computes the decomposed one.
inline float geluTanhSlope(float x) { return fast::geluTanhGrad(x); }
inline double geluTanhSlope(double x) {
  const double k = 0.7978845608028654;
  double x2 = x * x, t = std::tanh(k * (x + 0.044715 * x2 * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * ((1.0 - t * t) * k * (1.0 + 0.134145 * x2));
}

/// One value of the epilogue: (x + bias), activated, plus the addend.
template <typename T>
inline T epilogueValue(const MatmulShape &s, T x, const T *bias, int64_t j,
                       const T *addend, int64_t i, T *pre) {
  T v = bias ? x + bias[j] : x;
  if (pre)
    *pre = v;
  v = activate(s.activation, v);
  return addend ? v + addend[i] : v;
}

/// Applies the epilogue to `rows` rows of `n` values in place; `pre`
/// (optional) receives the values before the activation; `addend` (of the
/// rows' shape) is added last. With `geluInput` (of the rows' shape) the
/// values are multiplied by the GELU's derivative there instead.
template <typename T>
void epilogueInPlace(const MatmulShape &s, T *c, int64_t rows, const T *bias,
                     const T *addend, T *pre, const T *geluInput) {
  int threads = threadsFor(rows * s.n, 1 << 15);
  if (bias && !addend && !pre && !geluInput &&
      s.activation == Activation::None) {
    // A linear layer's bias alone: a loop the compiler vectorizes (the
    // general one below calls the activation's switch per element, three
    // times the cost of the GEMM's own pass over a [512, 1024] result).
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      T *out = c + row * s.n;
      for (int64_t j = 0; j < s.n; ++j)
        out[j] += bias[j];
    }
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < s.n; ++j) {
      int64_t i = row * s.n + j;
      c[i] = geluInput ? c[i] * geluTanhSlope(geluInput[i])
                       : epilogueValue(s, c[i], bias, j, addend, i,
                                       pre ? pre + i : nullptr);
    }
}

/// The store of a bf16 GEMM's f32 values: the epilogue, each output rounded
/// once to bf16, or (a widened result) stored as f32. `geluInput` (bf16
/// results only) is as in epilogueInPlace.
template <typename O>
void epilogueStore(const MatmulShape &s, const float *wide, int64_t rows,
                   const float *bias, const float *addend, O *c, O *pre,
                   const BF16 *geluInput) {
  if constexpr (std::is_same_v<O, BF16>) {
    if (!s.hasEpilogue())
      return roundToBF16(wide, c, rows * s.n);
    if (geluInput) {
      for (int64_t i = 0; i < rows * s.n; ++i)
        c[i] = roundToBF16(wide[i] * geluTanhSlope(widenBF16(geluInput[i])));
      return;
    }
  }
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < s.n; ++j) {
      int64_t i = row * s.n + j;
      float kept;
      float v =
          epilogueValue(s, wide[i], bias, j, addend, i, pre ? &kept : nullptr);
      if constexpr (std::is_same_v<O, BF16>) {
        if (pre)
          pre[i] = roundToBF16(kept);
        c[i] = roundToBF16(v);
      } else {
        if (pre)
          pre[i] = kept;
        c[i] = v;
      }
    }
}

/// The bias gradient: the sum over K of op(A) ([M, K]) or op(B) ([K, N]),
/// read in its stored layout, in f64, rounded once by `store`.
template <typename T, typename Store>
void sumOperand(const MatmulShape &s, const KernelArgs &args, Store store) {
  const bool lhs = s.biasGrad == BiasGrad::Lhs;
  const T *x = static_cast<const T *>(args.inputs[lhs ? 0 : 1]);
  const int64_t length = lhs ? s.m : s.n;
  // Stored [K, length] (op(A) transposed, op(B) not) or [length, K].
  const bool kMajor = lhs ? s.transA : !s.transB;
  std::vector<double> sums(size_t(length), 0.0);
  for (int64_t k = 0; k < s.k; ++k)
    for (int64_t j = 0; j < length; ++j)
      sums[j] += double(kMajor ? x[k * length + j] : x[j * s.k + k]);
  for (int64_t j = 0; j < length; ++j)
    store(j, sums[j]);
}

//===----------------------------------------------------------------------===//
// One GEMM: C[M,N] = op(A) * op(B), row-major, beta = 0.
//===----------------------------------------------------------------------===//

/// The portable fallback: i-k-j order so the innermost loop runs along
/// contiguous rows of B and C and vectorizes; B is copied untransposed first
/// when transposed. Blocked over K and N to stay in cache.
template <typename T>
void portableGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  const T *a, const T *b, T *c, bool parallel) {
  std::vector<T> bCopy;
  if (transB) {
    bCopy.resize(size_t(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        bCopy[p * n + j] = b[j * k + p];
    b = bCopy.data();
  }
  const int64_t aRow = transA ? 1 : k, aCol = transA ? m : 1;
  constexpr int64_t kBlock = 256, nBlock = 1024;
  int threads = parallel ? threadsFor(m * n * k, 1 << 16) : 1;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    T *cRow = c + i * n;
    std::fill(cRow, cRow + n, T(0));
    for (int64_t j0 = 0; j0 < n; j0 += nBlock) {
      int64_t j1 = std::min(n, j0 + nBlock);
      for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
        int64_t p1 = std::min(k, p0 + kBlock);
        for (int64_t p = p0; p < p1; ++p) {
          T av = a[i * aRow + p * aCol];
          const T *bRow = b + p * n;
          for (int64_t j = j0; j < j1; ++j)
            cRow[j] += av * bRow[j];
        }
      }
    }
  }
}

#ifdef LOOM_HAVE_OPENBLAS
void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0f, a, blasint(transA ? m : k), b,
              blasint(transB ? k : n), 0.0f, c, blasint(n));
}
void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const double *a, const double *b, double *c) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0, a, blasint(transA ? m : k), b,
              blasint(transB ? k : n), 0.0, c, blasint(n));
}

/// Lowers OpenBLAS to one thread while any scope is alive and restores the
/// count when the last one ends. A counter rather than save/restore per scope
/// so that kernels of several ranks running concurrently cannot restore each
/// other's "1" as the saved value. This is the only mutable global state of
/// the CPU kernels.
class SingleThreadedBlas {
public:
  SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex());
    if (depth()++ == 0) {
      saved() = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex());
    if (--depth() == 0)
      openblas_set_num_threads(saved());
  }

private:
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  static int &depth() {
    static int d = 0;
    return d;
  }
  static int &saved() {
    static int s = 1;
    return s;
  }
};
#endif

/// One GEMM; `parallel` says whether it may use several threads (false when
/// called inside a parallel loop over batches).
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T *a,
          const T *b, T *c, bool parallel) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(c, c + m * n, T(0));
    return;
  }
#ifdef LOOM_HAVE_OPENBLAS
  (void)parallel;
  blasGemm(transA, transB, m, n, k, a, b, c);
#else
  portableGemm(transA, transB, m, n, k, a, b, c, parallel);
#endif
}

/// Below this many multiply-adds per GEMM, batches run in parallel with
/// single-threaded GEMMs; above, each GEMM is threaded by itself. Small GEMMs
/// (attention: 128x64x128, 1M MACs) cannot keep two OpenBLAS threads busy,
/// while a 64M-MAC GEMM (~400x400x400) can. Not yet tuned on an idle machine
/// (the development machine was shared): revisit with the GPT benchmark.
constexpr int64_t kParallelBatchMaxMacs = int64_t(1) << 26;

template <typename T>
void gemmTyped(const MatmulShape &s, const KernelArgs &args) {
  const T *a = static_cast<const T *>(args.inputs[0]);
  const T *b = static_cast<const T *>(args.inputs[1]);
  T *c = static_cast<T *>(args.outputs[0]);

  // A linear layer: every batch uses the same B, so the batches of A are
  // consecutive rows of one [batch * M, K] matrix.
  if (!s.transA && s.batchB == 1 && s.batchA == s.batchC) {
    gemm(false, s.transB, s.batchC * s.m, s.n, s.k, a, b, c, true);
    return;
  }

  const int64_t aSize = s.m * s.k, bSize = s.k * s.n, cSize = s.m * s.n;
  auto one = [&](int64_t batch, bool parallel) {
    gemm(s.transA, s.transB, s.m, s.n, s.k, a + (batch % s.batchA) * aSize,
         b + (batch % s.batchB) * bSize, c + batch * cSize, parallel);
  };
  int threads = omp_get_max_threads();
  bool batchParallel = threads > 1 && s.batchC >= threads &&
                       s.m * s.n * s.k <= kParallelBatchMaxMacs &&
                       !omp_in_parallel();
  if (!batchParallel) {
    for (int64_t batch = 0; batch < s.batchC; ++batch)
      one(batch, true);
    return;
  }
#ifdef LOOM_HAVE_OPENBLAS
  SingleThreadedBlas singleThreaded;
#endif
#pragma omp parallel for schedule(static)
  for (int64_t batch = 0; batch < s.batchC; ++batch)
    one(batch, false);
}

template <typename T> void runTyped(const KernelArgs &args) {
  MatmulShape s;
  (void)readShape(args.instruction, s); // validated when the plan was loaded
  gemmTyped<T>(s, args);
  if (s.biasGrad != BiasGrad::None) {
    T *sum = static_cast<T *>(args.outputs[1]);
    sumOperand<T>(s, args, [&](int64_t j, double v) { sum[j] = T(v); });
  }
  if (s.hasEpilogue())
    epilogueInPlace(
        s, static_cast<T *>(args.outputs[0]), s.batchC * s.m,
        s.bias ? static_cast<const T *>(args.inputs[2]) : nullptr,
        s.addend ? static_cast<const T *>(
                       args.inputs[args.instruction.inputs.size() - 1])
                 : nullptr,
        s.preactivation ? static_cast<T *>(args.outputs[1]) : nullptr,
        s.geluGrad ? static_cast<const T *>(args.inputs[2]) : nullptr);
}

/// Rows of A (and C) a bf16 linear layer widens at a time: enough for the
/// f32 GEMM to run at full speed, few enough to stay in cache.
constexpr int64_t kBF16Rows = 256;

/// One bf16 GEMM: widens op(A) and op(B) into `work` (f32, in their stored
/// layout; room for A, B and C), multiplies in f32 and rounds into C.
template <typename O>
void gemmBF16(const MatmulShape &s, const BF16 *a, const BF16 *b,
              const float *bias, const float *addend, O *c, O *pre,
              const BF16 *geluInput, float *work, bool parallel) {
  const int64_t aSize = s.m * s.k, bSize = s.k * s.n;
  float *wideA = work, *wideB = wideA + aSize, *wideC = wideB + bSize;
  widenBF16(a, wideA, aSize);
  widenBF16(b, wideB, bSize);
  gemm(s.transA, s.transB, s.m, s.n, s.k, wideA, wideB, wideC, parallel);
  epilogueStore(s, wideC, s.m, bias, addend, c, pre, geluInput);
}

/// A bf16 GEMM whose result (and bias, addend, preactivation) is O: bf16,
/// or f32 for a widened result.
template <typename O>
void runBF16(const KernelArgs &args, const MatmulShape &s) {
  const BF16 *a = static_cast<const BF16 *>(args.inputs[0]);
  const BF16 *b = static_cast<const BF16 *>(args.inputs[1]);
  O *c = static_cast<O *>(args.outputs[0]);
  O *pre = s.preactivation ? static_cast<O *>(args.outputs[1]) : nullptr;
  const BF16 *geluInput =
      s.geluGrad ? static_cast<const BF16 *>(args.inputs[2]) : nullptr;
  const float *addend =
      s.addend ? static_cast<const float *>(
                     args.inputs[args.instruction.inputs.size() - 1])
               : nullptr;
  if (s.biasGrad != BiasGrad::None) {
    BF16 *sum = static_cast<BF16 *>(args.outputs[1]);
    // Widened exactly: the f64 sum of the stored bf16 values.
    struct Wide {
      BF16 bits;
      explicit operator double() const { return double(widenBF16(bits)); }
    };
    static_assert(sizeof(Wide) == sizeof(BF16));
    sumOperand<Wide>(s, args,
                     [&](int64_t j, double v) { sum[j] = roundToBF16(v); });
  }
  ScratchScope scratch;
  const float *bias = nullptr;
  if constexpr (std::is_same_v<O, float>) {
    bias = s.bias ? static_cast<const float *>(args.inputs[2]) : nullptr;
  } else if (s.bias) {
    float *wideBias = scratch.take<float>(size_t(s.n));
    widenBF16(static_cast<const BF16 *>(args.inputs[2]), wideBias, s.n);
    bias = wideBias;
  }

  if (!s.transA && s.batchB == 1 && s.batchA == s.batchC) {
    // A linear layer: B once, then blocks of the [batch * M, K] rows of A.
    float *wideB = scratch.take<float>(size_t(s.k * s.n));
    widenBF16(b, wideB, s.k * s.n);
    const int64_t rows = s.batchC * s.m;
    float *wideA = scratch.take<float>(size_t(std::min(rows, kBF16Rows) * s.k));
    float *wideC = scratch.take<float>(size_t(std::min(rows, kBF16Rows) * s.n));
    for (int64_t row = 0; row < rows; row += kBF16Rows) {
      int64_t count = std::min(kBF16Rows, rows - row);
      widenBF16(a + row * s.k, wideA, count * s.k);
      gemm(false, s.transB, count, s.n, s.k, wideA, wideB, wideC, true);
      epilogueStore(s, wideC, count, bias,
                    addend ? addend + row * s.n : nullptr, c + row * s.n,
                    pre ? pre + row * s.n : nullptr,
                    geluInput ? geluInput + row * s.n : nullptr);
    }
    return;
  }

  const int64_t aSize = s.m * s.k, bSize = s.k * s.n, cSize = s.m * s.n;
  const size_t workSize = size_t(aSize + bSize + cSize);
  auto one = [&](int64_t batch, float *work, bool parallel) {
    gemmBF16(s, a + (batch % s.batchA) * aSize, b + (batch % s.batchB) * bSize,
             bias, addend ? addend + batch * cSize : nullptr, c + batch * cSize,
             pre ? pre + batch * cSize : nullptr,
             geluInput ? geluInput + batch * cSize : nullptr, work, parallel);
  };
  int threads = omp_get_max_threads();
  bool batchParallel = threads > 1 && s.batchC >= threads &&
                       s.m * s.n * s.k <= kParallelBatchMaxMacs &&
                       !omp_in_parallel();
  if (!batchParallel) {
    float *work = scratch.take<float>(workSize);
    for (int64_t batch = 0; batch < s.batchC; ++batch)
      one(batch, work, true);
    return;
  }
#ifdef LOOM_HAVE_OPENBLAS
  SingleThreadedBlas singleThreaded;
#endif
#pragma omp parallel
  {
    // Each thread's own buffer.
    ScratchScope threadScratch;
    float *work = threadScratch.take<float>(workSize);
#pragma omp for schedule(static)
    for (int64_t batch = 0; batch < s.batchC; ++batch)
      one(batch, work, false);
  }
}

} // namespace

Status cpu::check_matmul(const Instruction &instruction) {
  MatmulShape shape;
  return readShape(instruction, shape);
}

void cpu::run_matmul(const KernelArgs &args) {
  switch (args.instruction.inputs[0].dtype) {
  case DType::F32:
    return runTyped<float>(args);
  case DType::BF16: {
    MatmulShape s;
    (void)readShape(args.instruction, s); // validated when the plan was loaded
    return s.widened ? runBF16<float>(args, s) : runBF16<BF16>(args, s);
  }
  default:
    return runTyped<double>(args);
  }
}
