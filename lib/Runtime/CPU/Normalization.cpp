//===- Normalization.cpp - CPU softmax, layer_norm, cross_entropy ---------===//
//
// Kernels that normalize along an axis. Each views its input as
// outer x n x inner around the normalized dims: with inner = 1 (the last
// axis, the common case) every row is contiguous and rows run in parallel;
// otherwise the work is vectorized across `inner` lanes. Statistics (sums,
// means, variances) accumulate in double.
//
//===----------------------------------------------------------------------===//

#include "BFloat16.h"
#include "CPUKernels.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

/// outer x n x inner around one axis.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView viewAround(const std::vector<int64_t> &shape, int64_t axis) {
  AxisView view;
  view.outer = dimProduct(shape, 0, size_t(axis));
  view.n = shape[size_t(axis)];
  view.inner = dimProduct(shape, size_t(axis) + 1, shape.size());
  return view;
}

/// Values as computed (f32 for f32 and bf16, f64 for f64) and stored,
/// rounded once to the destination's dtype.
inline float loadWide(const float *p) { return *p; }
inline double loadWide(const double *p) { return *p; }
inline float loadWide(const BF16 *p) { return widenBF16(*p); }
inline void storeRounded(float *out, float value) { *out = value; }
inline void storeRounded(double *out, double value) { *out = value; }
inline void storeRounded(float *out, double value) { *out = float(value); }
inline void storeRounded(BF16 *out, float value) { *out = roundToBF16(value); }

/// The dtype of `other` is `x`'s, or bf16 where `x` is f32 (layer norm's
/// narrow result and gradient under mixed precision).
Status expectSameOrBF16(const TensorRef &x, const TensorRef &other,
                        const char *name) {
  if (other.dtype == x.dtype ||
      (x.dtype == DType::F32 && other.dtype == DType::BF16))
    return Status::ok();
  return Status::error(std::string(name) + " has dtype " +
                       dtypeName(other.dtype) + "; input " +
                       dtypeName(x.dtype) + " needs " + dtypeName(x.dtype) +
                       (x.dtype == DType::F32 ? " or bf16" : ""));
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

Status readSoftmax(const Instruction &instruction, int64_t &axis) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {"axis"}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (Status s = expectFloat(x.dtype, "input"); !s)
    return s;
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (Status s = expectSameShape(x, "input", y, "result"); !s)
    return s;
  int64_t raw;
  if (Status s = getIntAttr(instruction.attrs, "axis", raw, false, -1); !s)
    return s;
  if (x.shape.empty())
    return Status::error("input must have rank >= 1");
  return normalizeAxis(raw, int64_t(x.shape.size()), axis);
}

/// y = e^(x - shift) and the sum of y, f32: vectorized fast exp.
LOOM_VECTOR_CLONES double expShifted(const float *x, float *y, int64_t n,
                                     float shift) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    float e = fast::exp(x[i] - shift);
    y[i] = e;
    sum += e;
  }
  return sum;
}

/// The sum of e^(x - shift), f32 (log_softmax: nothing stored, so the output
/// may alias the input).
LOOM_VECTOR_CLONES double expShiftedSum(const float *x, int64_t n,
                                        float shift) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += fast::exp(x[i] - shift);
  return sum;
}

double expShiftedSum(const double *x, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += std::exp(x[i] - shift);
  return sum;
}

double expShifted(const double *x, double *y, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

/// Softmax (or log-softmax) of n contiguous elements.
template <typename T, bool Log> void softmaxRow(const T *x, T *y, int64_t n) {
  T max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t i = 0; i < n; ++i)
    max = x[i] > max ? x[i] : max;
  double sum = 0;
  if constexpr (Log) {
    sum = expShiftedSum(x, n, max);
    // (x - max) - log(sum): subtracting max first keeps small results exact.
    T logSum = T(std::log(sum));
    for (int64_t i = 0; i < n; ++i)
      y[i] = (x[i] - max) - logSum;
  } else {
    sum = expShifted(x, y, n, max);
    T scale = T(1 / sum);
    for (int64_t i = 0; i < n; ++i)
      y[i] *= scale;
  }
}

/// Softmax along the middle dim of one n x inner block, lanes across inner.
template <typename T, bool Log>
void softmaxStrided(const T *x, T *y, int64_t n, int64_t inner) {
  std::vector<T> max(size_t(inner), -std::numeric_limits<T>::infinity());
  std::vector<double> sum(size_t(inner), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      T v = x[i * inner + j];
      max[j] = v > max[j] ? v : max[j];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      T e = std::exp(x[i * inner + j] - max[j]);
      if constexpr (!Log)
        y[i * inner + j] = e;
      sum[j] += e;
    }
  for (int64_t j = 0; j < inner; ++j)
    sum[j] = Log ? std::log(sum[j]) : 1 / sum[j];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      if constexpr (Log)
        y[i * inner + j] = (x[i * inner + j] - max[j]) - T(sum[j]);
      else
        y[i * inner + j] *= T(sum[j]);
    }
}

template <typename T, bool Log> void softmaxTyped(const KernelArgs &args) {
  int64_t axis;
  (void)readSoftmax(args.instruction, axis);
  AxisView v = viewAround(args.instruction.inputs[0].shape, axis);
  const T *x = static_cast<const T *>(args.inputs[0]);
  T *y = static_cast<T *>(args.outputs[0]);
  int threads = threadsFor(v.outer * v.n * v.inner, 1 << 13);
  if (v.inner == 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t o = 0; o < v.outer; ++o)
      softmaxRow<T, Log>(x + o * v.n, y + o * v.n, v.n);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t o = 0; o < v.outer; ++o)
    softmaxStrided<T, Log>(x + o * v.n * v.inner, y + o * v.n * v.inner, v.n,
                           v.inner);
}

template <bool Log> void runSoftmax(const KernelArgs &args) {
  if (args.instruction.inputs[0].dtype == DType::F32)
    softmaxTyped<float, Log>(args);
  else
    softmaxTyped<double, Log>(args);
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// The axis and epsilon of layer_norm and layer_norm_backward, checked
/// against their input `x`.
Status readLayerNormAttrs(const Instruction &instruction, const TensorRef &x,
                          int64_t &axis, double &epsilon) {
  if (Status s = expectKnownAttrs(instruction.attrs, {"axis", "epsilon"}); !s)
    return s;
  if (Status s = expectFloat(x.dtype, "input"); !s)
    return s;
  int64_t raw;
  if (Status s = getIntAttr(instruction.attrs, "axis", raw, false, -1); !s)
    return s;
  if (Status s =
          getDoubleAttr(instruction.attrs, "epsilon", epsilon, false, 1e-5);
      !s)
    return s;
  if (!(epsilon >= 0))
    return Status::error("epsilon must be >= 0");
  if (x.shape.empty())
    return Status::error("input must have rank >= 1");
  return normalizeAxis(raw, int64_t(x.shape.size()), axis);
}

/// `param` (scale, bias or their gradients) has x's dtype and the shape of
/// the normalized dims.
Status expectNormalizedParam(const TensorRef &x, int64_t axis,
                             const TensorRef &param, const char *name) {
  if (Status s = expectSameDType(x, "input", param, name); !s)
    return s;
  std::vector<int64_t> normalized(x.shape.begin() + axis, x.shape.end());
  if (param.shape != normalized)
    return Status::error(std::string(name) + " " + shapeString(param.shape) +
                         " should be " + shapeString(normalized) +
                         ", the normalized dims of input " +
                         shapeString(x.shape));
  return Status::ok();
}

Status readLayerNorm(const Instruction &instruction, int64_t &axis,
                     double &epsilon) {
  if (Status s = expectOperandCounts(instruction, 3, 1); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (Status s = readLayerNormAttrs(instruction, x, axis, epsilon); !s)
    return s;
  if (Status s = expectSameOrBF16(x, y, "result"); !s)
    return s;
  if (Status s = expectSameShape(x, "input", y, "result"); !s)
    return s;
  if (Status s = expectNormalizedParam(x, axis, instruction.inputs[1], "scale");
      !s)
    return s;
  return expectNormalizedParam(x, axis, instruction.inputs[2], "bias");
}

/// layer_norm_backward: x, scale, dy[, addend] -> dx, dscale, dbias[,
/// dx_bf16]. With an addend, dx is addend + the layer norm's input gradient
/// (each rounded to x's dtype first, as a separate add would see it); with
/// a fourth output, dx is also stored rounded to bf16.
Status readLayerNormBackward(const Instruction &instruction, int64_t &axis,
                             double &epsilon) {
  size_t inputs = instruction.inputs.size(),
         outputs = instruction.outputs.size();
  if (inputs < 3 || inputs > 4 || outputs < 3 || outputs > 4)
    return Status::error("expects 3 or 4 inputs (input, scale, dout, "
                         "addend) and 3 or 4 outputs (dinput, dscale, dbias, "
                         "dinput_bf16), got " +
                         std::to_string(inputs) + " and " +
                         std::to_string(outputs));
  const TensorRef &x = instruction.inputs[0];
  if (Status s = readLayerNormAttrs(instruction, x, axis, epsilon); !s)
    return s;
  if (inputs == 4) {
    const TensorRef &addend = instruction.inputs[3];
    if (Status s = expectSameDType(x, "input", addend, "addend"); !s)
      return s;
    if (Status s = expectSameShape(x, "input", addend, "addend"); !s)
      return s;
  }
  if (outputs == 4) {
    const TensorRef &narrow = instruction.outputs[3];
    if (x.dtype != DType::F32 || narrow.dtype != DType::BF16)
      return Status::error(std::string("dinput_bf16 has dtype ") +
                           dtypeName(narrow.dtype) +
                           "; it must be bf16, "
                           "of an f32 input (input is " +
                           dtypeName(x.dtype) + ")");
    if (Status s = expectSameShape(x, "input", narrow, "dinput_bf16"); !s)
      return s;
  }
  for (auto [ref, name] : {std::pair{&instruction.inputs[2], "dout"},
                           std::pair{&instruction.outputs[0], "dinput"}}) {
    Status s = ref == &instruction.inputs[2]
                   ? expectSameOrBF16(x, *ref, name)
                   : expectSameDType(x, "input", *ref, name);
    if (!s)
      return s;
    if (Status s = expectSameShape(x, "input", *ref, name); !s)
      return s;
  }
  for (auto [ref, name] : {std::pair{&instruction.inputs[1], "scale"},
                           std::pair{&instruction.outputs[1], "dscale"},
                           std::pair{&instruction.outputs[2], "dbias"}})
    if (Status s = expectNormalizedParam(x, axis, *ref, name); !s)
      return s;
  return Status::ok();
}

/// Mean and 1 / sqrt(variance + epsilon) of one row, in two passes in double
/// (mean, then squared deviations: no cancellation). The forward and the
/// backward share it, so the backward's statistics are the forward's.
template <typename T>
void rowStatistics(const T *in, int64_t n, double epsilon, double &mean,
                   double &rstd) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += in[i];
  mean = n ? sum / double(n) : 0;
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < n; ++i) {
    double d = double(in[i]) - mean;
    squares += d * d;
  }
  rstd = 1 / std::sqrt((n ? squares / double(n) : 0) + epsilon);
}

template <typename T, typename O> void layerNormTyped(const KernelArgs &args) {
  int64_t axis;
  double epsilon;
  (void)readLayerNorm(args.instruction, axis, epsilon);
  const std::vector<int64_t> &shape = args.instruction.inputs[0].shape;
  int64_t rows = dimProduct(shape, 0, size_t(axis));
  int64_t n = dimProduct(shape, size_t(axis), shape.size());
  const T *x = static_cast<const T *>(args.inputs[0]);
  const T *scale = static_cast<const T *>(args.inputs[1]);
  const T *bias = static_cast<const T *>(args.inputs[2]);
  O *y = static_cast<O *>(args.outputs[0]);
  int threads = threadsFor(rows * n, 1 << 13);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * n;
    O *out = y + r * n;
    double mean, rstdWide;
    rowStatistics(in, n, epsilon, mean, rstdWide);
    T rstd = T(rstdWide);
    T m = T(mean);
    for (int64_t i = 0; i < n; ++i)
      storeRounded(out + i, T((in[i] - m) * rstd * scale[i] + bias[i]));
  }
}

/// dx row by row (rows in parallel), then dscale and dbias column block by
/// column block, each column summed over the rows in order: the result does
/// not depend on the thread count.
template <typename T, typename D>
void layerNormBackwardTyped(const KernelArgs &args) {
  int64_t axis;
  double epsilon;
  (void)readLayerNormBackward(args.instruction, axis, epsilon);
  const std::vector<int64_t> &shape = args.instruction.inputs[0].shape;
  int64_t rows = dimProduct(shape, 0, size_t(axis));
  int64_t n = dimProduct(shape, size_t(axis), shape.size());
  const T *x = static_cast<const T *>(args.inputs[0]);
  const T *scale = static_cast<const T *>(args.inputs[1]);
  const D *dy = static_cast<const D *>(args.inputs[2]);
  const T *addend = args.instruction.inputs.size() == 4
                        ? static_cast<const T *>(args.inputs[3])
                        : nullptr;
  T *dx = static_cast<T *>(args.outputs[0]);
  T *dscale = static_cast<T *>(args.outputs[1]);
  T *dbias = static_cast<T *>(args.outputs[2]);
  BF16 *narrow = args.instruction.outputs.size() == 4
                     ? static_cast<BF16 *>(args.outputs[3])
                     : nullptr;
  std::vector<double> means(static_cast<size_t>(rows)),
      rstds(static_cast<size_t>(rows));
  int threads = threadsFor(rows * n, 1 << 13);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * n;
    const D *grad = dy + r * n;
    double mean, rstd;
    rowStatistics(in, n, epsilon, mean, rstd);
    means[size_t(r)] = mean;
    rstds[size_t(r)] = rstd;
    double sumG = 0, sumGX = 0;
#pragma omp simd reduction(+ : sumG, sumGX)
    for (int64_t i = 0; i < n; ++i) {
      double g = double(loadWide(grad + i)) * double(scale[i]);
      sumG += g;
      sumGX += g * ((double(in[i]) - mean) * rstd);
    }
    double meanG = n ? sumG / double(n) : 0, meanGX = n ? sumGX / double(n) : 0;
    T *out = dx + r * n;
    for (int64_t i = 0; i < n; ++i) {
      double xhat = (double(in[i]) - mean) * rstd;
      double g = double(loadWide(grad + i)) * double(scale[i]);
      out[i] = T(rstd * (g - meanG - xhat * meanGX));
    }
    if (addend) {
      const T *add = addend + r * n;
      for (int64_t i = 0; i < n; ++i)
        out[i] = add[i] + out[i];
    }
    if (narrow) {
      BF16 *copy = narrow + r * n;
      for (int64_t i = 0; i < n; ++i)
        storeRounded(copy + i, float(out[i]));
    }
  }
  constexpr int64_t kColumns = 64;
  int64_t blocks = (n + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(threadsFor(rows *n, 1 << 13))             \
    schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t first = b * kColumns, width = std::min(kColumns, n - first);
    double sumScale[kColumns] = {}, sumBias[kColumns] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T *in = x + r * n + first;
      const D *grad = dy + r * n + first;
      double mean = means[size_t(r)], rstd = rstds[size_t(r)];
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) {
        double g = double(loadWide(grad + j));
        sumScale[j] += g * ((double(in[j]) - mean) * rstd);
        sumBias[j] += g;
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      dscale[first + j] = T(sumScale[j]);
      dbias[first + j] = T(sumBias[j]);
    }
  }
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

enum class Reduction { None, Mean, Sum };

/// The dtype cross-entropy computes in and returns its loss in for `logits`:
/// f64 for f64, f32 for f32 and bf16.
DType lossDType(DType logits) {
  return logits == DType::F64 ? DType::F64 : DType::F32;
}

/// Checks logits [..., C] (f32, f64 or bf16) and labels [...] (i32, i64).
Status checkLogitsAndLabels(const TensorRef &logits, const TensorRef &labels) {
  if (Status s = expectFloatOrBF16(logits.dtype, "logits"); !s)
    return s;
  if (labels.dtype != DType::I32 && labels.dtype != DType::I64)
    return Status::error(std::string("labels have dtype ") +
                         dtypeName(labels.dtype) + "; expected i32 or i64");
  if (logits.shape.empty())
    return Status::error("logits must have rank >= 1 (classes last)");
  std::vector<int64_t> samples(logits.shape.begin(), logits.shape.end() - 1);
  if (labels.shape != samples)
    return Status::error("labels " + shapeString(labels.shape) + " should be " +
                         shapeString(samples) + " for logits " +
                         shapeString(logits.shape));
  return Status::ok();
}

Status expectLossDType(const TensorRef &logits, const TensorRef &value,
                       const std::string &what) {
  if (value.dtype == lossDType(logits.dtype))
    return Status::ok();
  return Status::error(what + " has dtype " + dtypeName(value.dtype) + "; " +
                       dtypeName(logits.dtype) + " logits need " +
                       dtypeName(lossDType(logits.dtype)));
}

struct CrossEntropyAttrs {
  Reduction reduction = Reduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  /// The leading entries of each row that are classes; the rest of the row
  /// (up to the last dimension) is padding.
  int64_t classes = 0;
};

/// Reads ignore_index and classes (default: the whole last dimension).
Status readLabelAttrs(const Instruction &instruction,
                      CrossEntropyAttrs &attrs) {
  attrs.hasIgnore = instruction.attrs.count("ignore_index") != 0;
  if (Status s = getIntAttr(instruction.attrs, "ignore_index",
                            attrs.ignoreIndex, false);
      !s)
    return s;
  const int64_t width = instruction.inputs[0].shape.back();
  if (Status s =
          getIntAttr(instruction.attrs, "classes", attrs.classes, false, width);
      !s)
    return s;
  if (instruction.attrs.count("classes") &&
      (attrs.classes < 1 || attrs.classes > width))
    return Status::error("classes " + std::to_string(attrs.classes) +
                         " must be in [1, " + std::to_string(width) +
                         "] for logits " +
                         shapeString(instruction.inputs[0].shape));
  return Status::ok();
}

/// Checks the scale and the gradient of cross_entropy_backward (and of
/// cross_entropy with a gradient output).
Status checkScaleAndGradient(const TensorRef &logits, const TensorRef &labels,
                             const TensorRef &scale, const TensorRef &dlogits) {
  if (Status s = expectLossDType(logits, scale, "scale"); !s)
    return s;
  if (!scale.shape.empty() && scale.shape != labels.shape)
    return Status::error("scale " + shapeString(scale.shape) +
                         " should be a scalar or " + shapeString(labels.shape) +
                         " (one per sample)");
  if (Status s = expectSameShape(logits, "logits", dlogits, "dlogits"); !s)
    return s;
  // Computed in the loss dtype and rounded once: to it, or to the next
  // narrower type (f32 -> bf16, f64 -> f32).
  DType computed = lossDType(logits.dtype);
  DType narrower = computed == DType::F64 ? DType::F32 : DType::BF16;
  if (dlogits.dtype != computed && dlogits.dtype != narrower)
    return Status::error(std::string("dlogits have dtype ") +
                         dtypeName(dlogits.dtype) + "; " +
                         dtypeName(logits.dtype) + " logits give " +
                         dtypeName(computed) + " or " + dtypeName(narrower));
  return Status::ok();
}

/// cross_entropy: logits and labels in, the loss out; or with the
/// gradient's scale as a third input, the loss and the gradient (what
/// cross_entropy_backward computes) out.
Status readCrossEntropy(const Instruction &instruction,
                        CrossEntropyAttrs &attrs) {
  const size_t inputs = instruction.inputs.size(),
               outputs = instruction.outputs.size();
  const bool withGradient = inputs == 3;
  if (!(inputs == 2 && outputs == 1) && !(withGradient && outputs == 2))
    return Status::error(
        "expected 2 inputs (logits, labels) and 1 output (the loss), or 3 "
        "inputs (and the gradient's scale) and 2 outputs (and the gradient), "
        "got " +
        std::to_string(inputs) + " and " + std::to_string(outputs));
  if (Status s = expectKnownAttrs(instruction.attrs,
                                  {"reduction", "ignore_index", "classes"});
      !s)
    return s;
  const TensorRef &logits = instruction.inputs[0],
                  &labels = instruction.inputs[1],
                  &loss = instruction.outputs[0];
  if (Status s = checkLogitsAndLabels(logits, labels); !s)
    return s;
  if (Status s = expectLossDType(logits, loss, "loss"); !s)
    return s;
  if (withGradient)
    if (Status s = checkScaleAndGradient(logits, labels, instruction.inputs[2],
                                         instruction.outputs[1]);
        !s)
      return s;
  std::string reduction;
  if (Status s =
          getWordAttr(instruction.attrs, "reduction", reduction, false, "mean");
      !s)
    return s;
  if (reduction == "none")
    attrs.reduction = Reduction::None;
  else if (reduction == "mean")
    attrs.reduction = Reduction::Mean;
  else if (reduction == "sum")
    attrs.reduction = Reduction::Sum;
  else
    return Status::error("reduction must be mean, sum or none, not '" +
                         reduction + "'");
  if (Status s = readLabelAttrs(instruction, attrs); !s)
    return s;
  std::vector<int64_t> samples(logits.shape.begin(), logits.shape.end() - 1);
  if (attrs.reduction == Reduction::None) {
    if (loss.shape != samples)
      return Status::error("loss " + shapeString(loss.shape) + " should be " +
                           shapeString(samples) + " with reduction=none");
  } else if (loss.elements() != 1) {
    return Status::error("loss " + shapeString(loss.shape) +
                         " should be a scalar with reduction=" + reduction);
  }
  return Status::ok();
}

/// The classes of rows of logits (`width` apart) as the cross-entropy
/// kernels compute with them: f32 and f64 rows in place, bf16 rows widened
/// to f32 into a buffer (one reader per thread).
template <typename T> struct LogitRows {
  using Compute = T;
  const T *logits;
  int64_t width, classes;
  const T *row(int64_t i) { return logits + i * width; }
};
template <> struct LogitRows<BF16> {
  using Compute = float;
  const BF16 *logits;
  int64_t width, classes;
  std::vector<float> wide = std::vector<float>(size_t(classes));
  const float *row(int64_t i) {
    widenBF16(logits + i * width, wide.data(), classes);
    return wide.data();
  }
};

template <typename C> C rowMax(const C *row, int64_t n) {
  C max = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t c = 0; c < n; ++c)
    max = row[c] > max ? row[c] : max;
  return max;
}

/// Whether sample `i`'s label is ignored; reports an out-of-range one.
bool skipSample(const KernelArgs &args, const CrossEntropyAttrs &attrs,
                int64_t label, int64_t i, int64_t classes, bool &invalid) {
  invalid = false;
  if (attrs.hasIgnore && label == attrs.ignoreIndex)
    return true;
  if (label >= 0 && label < classes)
    return false;
  reportError(args, "label " + std::to_string(label) + " of sample " +
                        std::to_string(i) + " is outside [0, " +
                        std::to_string(classes) + ")");
  invalid = true;
  return true;
}

/// The loss of reduction=sum or mean from the samples' `total` and the
/// number of samples `counted`.
template <typename C>
void storeTotal(const CrossEntropyAttrs &attrs, C *loss, double total,
                int64_t counted) {
  if (attrs.reduction == Reduction::Sum)
    loss[0] = C(total);
  else if (attrs.reduction == Reduction::Mean)
    loss[0] = C(total / double(counted)); // NaN when nothing counted
}

template <typename T, typename L>
void crossEntropyTyped(const KernelArgs &args, const CrossEntropyAttrs &attrs) {
  using C = typename LogitRows<T>::Compute;
  const std::vector<int64_t> &shape = args.instruction.inputs[0].shape;
  const int64_t width = shape.back(), classes = attrs.classes;
  const int64_t samples = dimProduct(shape, 0, shape.size() - 1);
  const T *logits = static_cast<const T *>(args.inputs[0]);
  const L *labels = static_cast<const L *>(args.inputs[1]);
  C *loss = static_cast<C *>(args.outputs[0]);
  double total = 0;
  int64_t counted = 0;
  int threads = threadsFor(samples * classes, 1 << 13);
#pragma omp parallel num_threads(threads) reduction(+ : total, counted)
  {
    LogitRows<T> rows{logits, width, classes};
#pragma omp for schedule(static)
    for (int64_t i = 0; i < samples; ++i) {
      int64_t label = int64_t(labels[i]);
      bool invalid;
      double sampleLoss = 0;
      if (skipSample(args, attrs, label, i, classes, invalid)) {
        if (invalid)
          sampleLoss = std::numeric_limits<double>::quiet_NaN();
      } else {
        const C *row = rows.row(i);
        C max = rowMax(row, classes);
        // The vectorized exp of softmax: a scalar std::exp per class made
        // this the step's most expensive kernel on large vocabularies.
        double sum = expShiftedSum(row, classes, max);
        sampleLoss = double(max) + std::log(sum) - double(row[label]);
        ++counted;
      }
      if (attrs.reduction == Reduction::None)
        loss[i] = C(sampleLoss);
      total += sampleLoss;
    }
  }
  storeTotal(attrs, loss, total, counted);
}

//===----------------------------------------------------------------------===//
// cross_entropy_backward
//===----------------------------------------------------------------------===//

Status readCrossEntropyBackward(const Instruction &instruction,
                                CrossEntropyAttrs &attrs) {
  if (Status s = expectOperandCounts(instruction, 3, 1); !s)
    return s;
  if (Status s =
          expectKnownAttrs(instruction.attrs, {"ignore_index", "classes"});
      !s)
    return s;
  const TensorRef &logits = instruction.inputs[0],
                  &labels = instruction.inputs[1];
  if (Status s = checkLogitsAndLabels(logits, labels); !s)
    return s;
  if (Status s = checkScaleAndGradient(logits, labels, instruction.inputs[2],
                                       instruction.outputs[0]);
      !s)
    return s;
  attrs.reduction = Reduction::None;
  return readLabelAttrs(instruction, attrs);
}

/// The gradient of one thread's samples and their losses: each row read
/// once for both.
template <typename T, typename O> class GradientRows {
public:
  using C = typename LogitRows<T>::Compute;
  GradientRows(const T *logits, int64_t width, int64_t classes)
      : rows{logits, width, classes} {}

  /// Sample i's gradient (softmax(row) - onehot(label)) * factor, the
  /// probabilities as softmax computes them (e^(x - max) times 1/sum), in
  /// the loss dtype and rounded once to `out`; 0 for the padding after the
  /// classes. Returns the sample's loss as cross_entropy computes it (NaN
  /// for an out-of-range label, 0 for an ignored one) and whether the
  /// sample counts.
  double write(const KernelArgs &args, const CrossEntropyAttrs &attrs,
               int64_t i, int64_t label, C factor, O *out, bool &counts) {
    const int64_t width = rows.width, classes = rows.classes;
    for (int64_t c = classes; c < width; ++c)
      storeRounded(out + c, C(0));
    bool invalid;
    counts = !skipSample(args, attrs, label, i, classes, invalid);
    if (!counts) {
      C fill = invalid ? std::numeric_limits<C>::quiet_NaN() : C(0);
      for (int64_t c = 0; c < classes; ++c)
        storeRounded(out + c, fill);
      return invalid ? std::numeric_limits<double>::quiet_NaN() : 0;
    }
    const C *row = rows.row(i);
    C max = rowMax(row, classes);
    double sum = expShifted(row, e.data(), classes, max);
    C inverse = C(1 / sum);
    for (int64_t c = 0; c < classes; ++c) {
      C p = e[size_t(c)] * inverse;
      storeRounded(out + c, (c == label ? p - C(1) : p) * factor);
    }
    return double(max) + std::log(sum) - double(row[label]);
  }

private:
  LogitRows<T> rows;
  std::vector<C> e = std::vector<C>(size_t(rows.classes));
};

/// cross_entropy_backward, or (`WithLoss`) cross_entropy with a gradient
/// output: the gradient of every sample as GradientRows computes it, and
/// the loss as crossEntropyTyped does.
template <typename T, typename L, typename O, bool WithLoss>
void crossEntropyGradientTyped(const KernelArgs &args,
                               const CrossEntropyAttrs &attrs) {
  using C = typename LogitRows<T>::Compute;
  const std::vector<int64_t> &shape = args.instruction.inputs[0].shape;
  const int64_t width = shape.back(), classes = attrs.classes;
  const int64_t samples = dimProduct(shape, 0, shape.size() - 1);
  const T *logits = static_cast<const T *>(args.inputs[0]);
  const L *labels = static_cast<const L *>(args.inputs[1]);
  const C *scale = static_cast<const C *>(args.inputs[2]);
  const bool scalePerSample = !args.instruction.inputs[2].shape.empty();
  O *dlogits = static_cast<O *>(args.outputs[WithLoss ? 1 : 0]);
  C *loss = WithLoss ? static_cast<C *>(args.outputs[0]) : nullptr;
  double total = 0;
  int64_t counted = 0;
  int threads = threadsFor(samples * classes, 1 << 13);
#pragma omp parallel num_threads(threads) reduction(+ : total, counted)
  {
    GradientRows<T, O> rows(logits, width, classes);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < samples; ++i) {
      bool counts;
      double sampleLoss = rows.write(args, attrs, i, int64_t(labels[i]),
                                     scale[scalePerSample ? i : 0],
                                     dlogits + i * width, counts);
      if (WithLoss && attrs.reduction == Reduction::None)
        loss[i] = C(sampleLoss);
      total += sampleLoss;
      counted += counts;
    }
  }
  if (WithLoss)
    storeTotal(attrs, loss, total, counted);
}

/// Runs crossEntropyGradientTyped for the gradient's dtype: the loss
/// dtype or the next narrower one (checkScaleAndGradient allows no other).
template <typename T, typename L, bool WithLoss>
void crossEntropyGradientTo(const KernelArgs &args,
                            const CrossEntropyAttrs &attrs) {
  using C = typename LogitRows<T>::Compute;
  using Narrower = std::conditional_t<std::is_same_v<C, double>, float, BF16>;
  if (args.instruction.outputs[WithLoss ? 1 : 0].dtype ==
      lossDType(args.instruction.inputs[0].dtype))
    crossEntropyGradientTyped<T, L, C, WithLoss>(args, attrs);
  else
    crossEntropyGradientTyped<T, L, Narrower, WithLoss>(args, attrs);
}

/// Calls `run(T(), L())` with T the logits' storage type (float, double,
/// BF16) and L the labels' (int32_t, int64_t).
template <typename Run>
void dispatchLogitsAndLabels(const KernelArgs &args, Run run) {
  bool i32 = args.instruction.inputs[1].dtype == DType::I32;
  switch (args.instruction.inputs[0].dtype) {
  case DType::F64:
    return i32 ? run(double(), int32_t()) : run(double(), int64_t());
  case DType::F32:
    return i32 ? run(float(), int32_t()) : run(float(), int64_t());
  default:
    return i32 ? run(BF16(), int32_t()) : run(BF16(), int64_t());
  }
}

} // namespace

Status cpu::check_softmax(const Instruction &instruction) {
  int64_t axis;
  return readSoftmax(instruction, axis);
}
Status cpu::check_log_softmax(const Instruction &instruction) {
  int64_t axis;
  return readSoftmax(instruction, axis);
}
void cpu::run_softmax(const KernelArgs &args) { runSoftmax<false>(args); }
void cpu::run_log_softmax(const KernelArgs &args) { runSoftmax<true>(args); }

Status cpu::check_layer_norm(const Instruction &instruction) {
  int64_t axis;
  double epsilon;
  return readLayerNorm(instruction, axis, epsilon);
}
void cpu::run_layer_norm(const KernelArgs &args) {
  if (args.instruction.inputs[0].dtype == DType::F64)
    layerNormTyped<double, double>(args);
  else if (args.instruction.outputs[0].dtype == DType::BF16)
    layerNormTyped<float, BF16>(args);
  else
    layerNormTyped<float, float>(args);
}

Status cpu::check_layer_norm_backward(const Instruction &instruction) {
  int64_t axis;
  double epsilon;
  return readLayerNormBackward(instruction, axis, epsilon);
}
void cpu::run_layer_norm_backward(const KernelArgs &args) {
  if (args.instruction.inputs[0].dtype == DType::F64)
    layerNormBackwardTyped<double, double>(args);
  else if (args.instruction.inputs[2].dtype == DType::BF16)
    layerNormBackwardTyped<float, BF16>(args);
  else
    layerNormBackwardTyped<float, float>(args);
}

Status cpu::check_cross_entropy(const Instruction &instruction) {
  CrossEntropyAttrs attrs;
  return readCrossEntropy(instruction, attrs);
}
void cpu::run_cross_entropy(const KernelArgs &args) {
  CrossEntropyAttrs attrs;
  (void)readCrossEntropy(args.instruction, attrs);
  dispatchLogitsAndLabels(args, [&](auto logits, auto labels) {
    using T = decltype(logits);
    using L = decltype(labels);
    if (args.instruction.inputs.size() == 3)
      crossEntropyGradientTo<T, L, /*WithLoss=*/true>(args, attrs);
    else
      crossEntropyTyped<T, L>(args, attrs);
  });
}

Status cpu::check_cross_entropy_backward(const Instruction &instruction) {
  CrossEntropyAttrs attrs;
  return readCrossEntropyBackward(instruction, attrs);
}
void cpu::run_cross_entropy_backward(const KernelArgs &args) {
  CrossEntropyAttrs attrs;
  (void)readCrossEntropyBackward(args.instruction, attrs);
  dispatchLogitsAndLabels(args, [&](auto logits, auto labels) {
    crossEntropyGradientTo<decltype(logits), decltype(labels),
                           /*WithLoss=*/false>(args, attrs);
  });
}
