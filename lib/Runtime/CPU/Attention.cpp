//===- Attention.cpp - CPU attention, attention_backward ------------------===//
//
// Scaled dot-product attention over [..., S, D] operands, and its gradient:
// the reference the CUDA backend's flash kernels are compared with.
//
//   attention(q, k, v[, mask]) -> out, lse        {scale, mask_value}
//   attention_backward(q, k, v, dout, lse, out[, mask]) -> dq, dk, dv
//
// Per row i of one batch: s[j] = scale * q[i] . k[j], or mask_value where
// mask[i, j] is true (true = masked out; mask_value defaults to -inf);
// p = softmax(s); out[i] = sum_j p~[j] v[j]; lse[i] = log sum_j e^s[j].
// The backward recomputes p = e^(s - lse) and computes delta[i] = dout[i] .
// out[i] (products in C, summed in f64): ds = p (dout . v - delta), 0 where
// masked (those
// scores are constants); dv = p~^T dout, dq = scale ds~ k, dk = scale ds~^T q.
// p~ and ds~ are p and ds rounded to the element type (bf16: as a flash
// kernel rounds them for a bf16 tensor-core product; f32, f64: unchanged).
// Everything accumulates in f32 (f64 for f64) and is rounded once on store.
//
// With seq_major=1 q, k, v, dout, out and the gradients are [..., S, H, D]
// and lse [..., S, H] (the mask stays [..., H, Sq, Sk]): they are
// gathered into the head-major form on entry and scattered back on exit,
// which is all the layout changes here. With packed_qkv=1 (seq-major too)
// q, k and v are one operand qkv [..., S, 3, H, D], and the backward's
// gradients one result dqkv of that shape:
//
//   attention(qkv[, mask]) -> out, lse
//   attention_backward(qkv, dout, lse, out[, mask]) -> dqkv
//
// Only where the gather and scatter find a row changes.
//
// A score of -inf contributes nothing (p = 0, even where lse is -inf), so a
// row whose every score is -inf (fully masked) gives out = NaN and
// lse = -inf, as the unfused softmax would, and zero gradients.
//
// Work items are (batch, block of query rows) for the forward and dq, and
// (batch, block of key rows) for dk and dv, run in parallel; each output
// element is computed by one item in a fixed order (deterministic). Products
// are written as row updates over a transposed operand (y += a * x over a
// contiguous row), which vectorize. With mask_value -inf an item only visits
// the keys (queries) between the first and last unmasked entry of its rows
// (columns): a causal mask halves the work.
//
//===----------------------------------------------------------------------===//

#include "BFloat16.h"
#include "CPUKernels.h"
#include "Scratch.h"

#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// The validated geometry of one attention or attention_backward.
struct AttentionShape {
  bool backward = false;
  DType dtype = DType::F32;
  /// The leading ("batch") dims of the head-major form of q, k and v (heads
  /// last), and their product.
  std::vector<int64_t> lead;
  int64_t batch = 1;
  /// Operands are [..., S, H, D] (seq_major=1); `heads` is H then, 1
  /// otherwise.
  bool seqMajor = false;
  int64_t heads = 1;
  /// q, k and v are one operand [..., S, 3, H, D] (packed_qkv=1), and so
  /// are dq, dk and dv.
  bool packed = false;
  /// Where dout, lse, out and the mask are among the inputs.
  size_t doutInput = 3, lseInput = 4, outInput = 5, maskInput = 3;
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  double scale = 1;
  double maskValue = -std::numeric_limits<double>::infinity();
  /// The mask's strides (in elements) along `lead`: 0 where it broadcasts.
  bool hasMask = false;
  std::vector<int64_t> maskStrides;

  /// Masked entries contribute nothing (p = 0), so blocks may skip them.
  bool masksSkip() const {
    return hasMask && std::isinf(maskValue) && maskValue < 0;
  }

  /// The shape of an operand with `rows` rows of `cols` (none for lse) in
  /// the instruction's layout.
  std::vector<int64_t> operandShape(int64_t rows,
                                    std::optional<int64_t> cols) const {
    std::vector<int64_t> dims = lead;
    if (seqMajor)
      dims.back() = rows; // [..., rows, H]
    else
      dims.push_back(rows);
    if (seqMajor)
      dims.push_back(heads);
    if (cols)
      dims.push_back(*cols);
    return dims;
  }

  /// The index of row i of (head-major) batch b among an operand's rows
  /// of the instruction's layout.
  int64_t rowIndex(int64_t b, int64_t i, int64_t rows) const {
    return ((b / heads) * rows + i) * heads + b % heads;
  }

  /// Elements between the sequence positions of q, k or v (and of their
  /// gradients), and where part `part` (0: q, 1: k, 2: v) starts.
  int64_t qkvStride(int64_t cols) const {
    return packed ? 3 * heads * cols : heads * cols;
  }
  int64_t qkvBase(int part, int64_t cols) const {
    return packed ? part * heads * cols : 0;
  }
};

std::vector<int64_t> concatDims(std::vector<int64_t> dims,
                                std::initializer_list<int64_t> tail) {
  dims.insert(dims.end(), tail.begin(), tail.end());
  return dims;
}

/// Fails unless `t` has `dtype` and `shape`; `what` names it.
Status expectTensor(const TensorRef &t, const std::string &what, DType dtype,
                    const std::vector<int64_t> &shape) {
  if (t.dtype != dtype)
    return Status::error(what + " has dtype " + dtypeName(t.dtype) +
                         "; expected " + dtypeName(dtype));
  if (t.shape != shape)
    return Status::error(what + " " + shapeString(t.shape) + " should be " +
                         shapeString(shape));
  return Status::ok();
}

Status readMask(const TensorRef &mask, AttentionShape &s) {
  if (mask.dtype != DType::I1)
    return Status::error(std::string("mask has dtype ") +
                         dtypeName(mask.dtype) + "; expected i1");
  std::vector<int64_t> full = concatDims(s.lead, {s.sq, s.sk});
  bool fits = mask.shape.size() == full.size() &&
              mask.shape[full.size() - 2] == s.sq &&
              mask.shape[full.size() - 1] == s.sk;
  for (size_t i = 0; fits && i < s.lead.size(); ++i)
    fits = mask.shape[i] == 1 || mask.shape[i] == s.lead[i];
  if (!fits)
    return Status::error("mask " + shapeString(mask.shape) +
                         " should be [..., Sq, Sk] = " + shapeString(full) +
                         ", each batch dim 1 (broadcast) or q's");
  s.hasMask = true;
  std::vector<int64_t> strides = contiguousStrides(mask.shape);
  s.maskStrides.assign(s.lead.size(), 0);
  for (size_t i = 0; i < s.lead.size(); ++i)
    s.maskStrides[i] = mask.shape[i] == 1 ? 0 : strides[i];
  return Status::ok();
}

/// Reads the 0/1 attribute `name` (default 0).
Status readFlag(const Instruction &instruction, const char *name, bool &flag) {
  int64_t value = 0;
  if (Status st = getIntAttr(instruction.attrs, name, value, false); !st)
    return st;
  if (value != 0 && value != 1)
    return Status::error(std::string(name) + " must be 0 or 1, got " +
                         std::to_string(value));
  flag = value == 1;
  return Status::ok();
}

/// The operand counts and names of the four forms.
Status checkArity(const Instruction &instruction, AttentionShape &s) {
  const bool backward = s.backward, packed = s.packed;
  const size_t operands = packed ? (backward ? 4 : 1) : (backward ? 6 : 3);
  const size_t results = backward ? (packed ? 1 : 3) : 2;
  const size_t inputs = instruction.inputs.size();
  if ((inputs == operands || inputs == operands + 1) &&
      instruction.outputs.size() == results) {
    if (packed) {
      s.doutInput = 1;
      s.lseInput = 2;
      s.outInput = 3;
    }
    s.maskInput = operands;
    return Status::ok();
  }
  const char *expected =
      packed ? (backward ? "4 or 5 inputs (qkv, dout, lse, out, mask) and 1 "
                           "output (dqkv)"
                         : "1 or 2 inputs (qkv, mask) and 2 outputs (out, lse)")
      : backward ? "6 or 7 inputs (q, k, v, dout, lse, out, mask) and 3 "
                   "outputs (dq, dk, dv)"
                 : "3 or 4 inputs (q, k, v, mask) and 2 outputs (out, lse)";
  return Status::error(std::string("expects ") + expected + ", got " +
                       std::to_string(inputs) + " and " +
                       std::to_string(instruction.outputs.size()));
}

/// The shape of q, k and v packed in `qkv` ([..., S, 3, H, D]).
Status unpackedShape(const TensorRef &qkv, std::vector<int64_t> &part) {
  const size_t rank = qkv.shape.size();
  if (rank < 4 || qkv.shape[rank - 3] != 3)
    return Status::error("qkv " + shapeString(qkv.shape) +
                         " must be [..., S, 3, H, D]");
  part = qkv.shape;
  part.erase(part.end() - 3);
  return Status::ok();
}

Status readAttention(const Instruction &instruction, bool backward,
                     AttentionShape &s) {
  s.backward = backward;
  if (Status st =
          expectKnownAttrs(instruction.attrs,
                           {"scale", "mask_value", "seq_major", "packed_qkv"});
      !st)
    return st;
  if (Status st = readFlag(instruction, "seq_major", s.seqMajor); !st)
    return st;
  if (Status st = readFlag(instruction, "packed_qkv", s.packed); !st)
    return st;
  if (s.packed && !s.seqMajor)
    return Status::error("packed_qkv=1 needs seq_major=1 (qkv is "
                         "[..., S, 3, H, D])");
  if (Status st = checkArity(instruction, s); !st)
    return st;
  if (Status st = getDoubleAttr(instruction.attrs, "scale", s.scale, true); !st)
    return st;
  if (Status st = getDoubleAttr(instruction.attrs, "mask_value", s.maskValue,
                                false, s.maskValue);
      !st)
    return st;
  if (std::isnan(s.maskValue))
    return Status::error("mask_value must not be NaN");

  // q, k and v: the instruction's, or views of its qkv with their shape.
  TensorRef q, k, v;
  if (s.packed) {
    q = instruction.inputs[0];
    if (Status st = unpackedShape(instruction.inputs[0], q.shape); !st)
      return st;
    k = v = q;
  } else {
    q = instruction.inputs[0];
    k = instruction.inputs[1];
    v = instruction.inputs[2];
  }
  if (Status st = expectFloatOrBF16(q.dtype, s.packed ? "qkv" : "q"); !st)
    return st;
  if (Status st = expectSameDType(q, "q", k, "k"); !st)
    return st;
  if (Status st = expectSameDType(q, "q", v, "v"); !st)
    return st;
  const size_t rank = q.shape.size();
  if (rank < (s.seqMajor ? 3 : 2))
    return Status::error("q " + shapeString(q.shape) +
                         (s.seqMajor ? " must have rank >= 3 ([..., Sq, H, D])"
                                     : " must have rank >= 2 ([..., Sq, D])"));
  if (k.shape.size() != rank || v.shape.size() != rank)
    return Status::error("q " + shapeString(q.shape) + ", k " +
                         shapeString(k.shape) + " and v " +
                         shapeString(v.shape) + " must have the same rank");
  s.dtype = q.dtype;
  // Rows are dimension rank-3 when seq-major (heads rank-2), else rank-2.
  const size_t rowDim = s.seqMajor ? rank - 3 : rank - 2;
  s.lead.assign(q.shape.begin(), q.shape.begin() + rowDim);
  if (s.seqMajor) {
    s.heads = q.shape[rank - 2];
    s.lead.push_back(s.heads);
  }
  s.batch = dimProduct(s.lead, 0, s.lead.size());
  s.sq = q.shape[rowDim];
  s.d = q.shape[rank - 1];
  s.sk = k.shape[rowDim];
  s.dv = v.shape[rank - 1];
  if (k.shape != s.operandShape(s.sk, s.d))
    return Status::error("k " + shapeString(k.shape) + " should be " +
                         shapeString(s.operandShape(s.sk, s.d)) +
                         ": q's batch dims and head dim");
  if (v.shape != s.operandShape(s.sk, s.dv))
    return Status::error("v " + shapeString(v.shape) +
                         " should have q's batch dims and k's " +
                         std::to_string(s.sk) + " keys");

  const DType stat = q.dtype == DType::F64 ? DType::F64 : DType::F32;
  const std::vector<int64_t> outShape = s.operandShape(s.sq, s.dv);
  const std::vector<int64_t> rowShape = s.operandShape(s.sq, std::nullopt);
  if (backward) {
    if (Status st = expectTensor(instruction.inputs[s.doutInput], "dout",
                                 q.dtype, outShape);
        !st)
      return st;
    if (Status st =
            expectTensor(instruction.inputs[s.lseInput], "lse", stat, rowShape);
        !st)
      return st;
    if (Status st = expectTensor(instruction.inputs[s.outInput], "out", q.dtype,
                                 outShape);
        !st)
      return st;
    const char *names[] = {"dq", "dk", "dv"};
    if (s.packed) {
      if (Status st = expectTensor(instruction.outputs[0], "dqkv", q.dtype,
                                   instruction.inputs[0].shape);
          !st)
        return st;
    } else {
      for (size_t i = 0; i < 3; ++i)
        if (Status st = expectTensor(instruction.outputs[i], names[i],
                                     instruction.inputs[i].dtype,
                                     instruction.inputs[i].shape);
            !st)
          return st;
    }
  } else {
    if (Status st =
            expectTensor(instruction.outputs[0], "out", q.dtype, outShape);
        !st)
      return st;
    if (Status st = expectTensor(instruction.outputs[1], "lse", stat, rowShape);
        !st)
      return st;
  }
  if (instruction.inputs.size() > s.maskInput)
    return readMask(instruction.inputs[s.maskInput], s);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Vectorized building blocks
//===----------------------------------------------------------------------===//

/// out[r, j] = sum_t a[r * lda + t] * bt[t * ldb + j] for r < rows, j < n.
template <typename C>
inline void productRowsImpl(const C *a, int64_t lda, int64_t rows,
                            int64_t inner, const C *bt, int64_t ldb, int64_t n,
                            C *out) {
  for (int64_t r = 0; r < rows; ++r) {
    C *o = out + r * n;
    for (int64_t j = 0; j < n; ++j)
      o[j] = C(0);
    for (int64_t t = 0; t < inner; ++t) {
      const C x = a[r * lda + t];
      const C *b = bt + t * ldb;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        o[j] += x * b[j];
    }
  }
}

/// acc[c] = sum_j w[j] * rows[j * ld + c] for c < width.
template <typename C>
inline void weightedSumImpl(const C *w, int64_t n, const C *rows, int64_t ld,
                            int64_t width, C *acc) {
  for (int64_t c = 0; c < width; ++c)
    acc[c] = C(0);
  for (int64_t j = 0; j < n; ++j) {
    const C x = w[j];
    const C *row = rows + j * ld;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      acc[c] += x * row[c];
  }
}

LOOM_VECTOR_CLONES void productRows(const float *a, int64_t lda, int64_t rows,
                                    int64_t inner, const float *bt, int64_t ldb,
                                    int64_t n, float *out) {
  productRowsImpl(a, lda, rows, inner, bt, ldb, n, out);
}
LOOM_VECTOR_CLONES void productRows(const double *a, int64_t lda, int64_t rows,
                                    int64_t inner, const double *bt,
                                    int64_t ldb, int64_t n, double *out) {
  productRowsImpl(a, lda, rows, inner, bt, ldb, n, out);
}
LOOM_VECTOR_CLONES void weightedSum(const float *w, int64_t n,
                                    const float *rows, int64_t ld,
                                    int64_t width, float *acc) {
  weightedSumImpl(w, n, rows, ld, width, acc);
}
LOOM_VECTOR_CLONES void weightedSum(const double *w, int64_t n,
                                    const double *rows, int64_t ld,
                                    int64_t width, double *acc) {
  weightedSumImpl(w, n, rows, ld, width, acc);
}

inline float expOf(float x) { return fast::exp(x); }
inline double expOf(double x) { return std::exp(x); }

/// e^(s - shift), 0 for a score of -inf whatever the shift (a fully masked
/// row has shift -inf too).
template <typename C> inline C expShift(C s, C shift) {
  return s == -std::numeric_limits<C>::infinity() ? C(0) : expOf(s - shift);
}

/// `x` rounded to bf16 when the element type is bf16.
template <typename C> inline C roundLike(C x, bool bf16) {
  return bf16 ? C(roundThroughBF16(float(x))) : x;
}

/// in [batch][rows][cols] -> out [batch][cols][rows].
template <typename C>
void transposeBatches(const C *in, C *out, int64_t batch, int64_t rows,
                      int64_t cols) {
  int threads = threadsFor(batch * rows * cols, 1 << 15);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const C *x = in + b * rows * cols;
    C *y = out + b * rows * cols;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[c * rows + r] = x[r * cols + c];
  }
}

//===----------------------------------------------------------------------===//
// The kernels, on operands in the compute type C (f32 for f32 and bf16)
//===----------------------------------------------------------------------===//

/// Query rows (forward, dq) or key rows (dk, dv) per work item.
constexpr int64_t kBlock = 32;

template <typename C> struct Problem {
  const AttentionShape &s;
  C scale, maskValue;
  /// Round p and ds to bf16 before the products that take them.
  bool bf16;
  /// The mask (bytes, 1 = masked) and the offset of each batch's [Sq, Sk].
  const uint8_t *mask = nullptr;
  std::vector<int64_t> maskOffsets;

  Problem(const AttentionShape &s, const void *maskData)
      : s(s), scale(C(s.scale)), maskValue(C(s.maskValue)),
        bf16(s.dtype == DType::BF16),
        mask(static_cast<const uint8_t *>(maskData)) {
    if (!mask)
      return;
    maskOffsets.resize(size_t(s.batch));
    for (int64_t b = 0; b < s.batch; ++b) {
      int64_t rest = b, offset = 0;
      for (size_t i = s.lead.size(); i-- > 0;) {
        offset += (rest % s.lead[i]) * s.maskStrides[i];
        rest /= s.lead[i];
      }
      maskOffsets[size_t(b)] = offset;
    }
  }

  /// Batch b's [Sq, Sk] mask, or null.
  const uint8_t *maskOf(int64_t b) const {
    return mask ? mask + maskOffsets[size_t(b)] : nullptr;
  }

  /// Keys [lo, hi) that hold every entry of rows [i0, i1) that contributes:
  /// all keys, unless masked entries contribute nothing.
  void liveKeys(const uint8_t *m, int64_t i0, int64_t i1, int64_t &lo,
                int64_t &hi) const {
    lo = 0;
    hi = s.sk;
    if (!m || !s.masksSkip())
      return;
    lo = s.sk;
    hi = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t *row = m + i * s.sk;
      int64_t first = 0, last = s.sk;
      while (first < last && row[first])
        ++first;
      while (last > first && row[last - 1])
        --last;
      if (first < last) {
        lo = std::min(lo, first);
        hi = std::max(hi, last);
      }
    }
  }

  /// Queries [lo, hi) that hold every contributing entry of keys [j0, j1).
  void liveQueries(const uint8_t *m, int64_t j0, int64_t j1, int64_t &lo,
                   int64_t &hi) const {
    lo = 0;
    hi = s.sq;
    if (!m || !s.masksSkip())
      return;
    lo = s.sq;
    hi = 0;
    for (int64_t i = 0; i < s.sq; ++i) {
      const uint8_t *row = m + i * s.sk;
      bool live = false;
      for (int64_t j = j0; j < j1 && !live; ++j)
        live = !row[j];
      if (live) {
        lo = std::min(lo, i);
        hi = i + 1;
      }
    }
  }
};

template <typename C> struct ForwardOperands {
  const C *q, *kt, *v; // kt: k transposed, [batch][D][Sk]
  C *out, *lse;
};

template <typename C>
void forward(const Problem<C> &pb, const ForwardOperands<C> &x) {
  const AttentionShape &s = pb.s;
  const int64_t blocks = (s.sq + kBlock - 1) / kBlock;
  const int threads =
      threadsFor(s.batch * s.sq * s.sk * (s.d + s.dv), int64_t(1) << 16);
  const C inf = std::numeric_limits<C>::infinity();
#pragma omp parallel num_threads(threads)
  {
    std::vector<C> scores, acc(size_t(s.dv));
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < s.batch * blocks; ++item) {
      const int64_t b = item / blocks;
      const int64_t i0 = (item % blocks) * kBlock,
                    i1 = std::min(s.sq, i0 + kBlock);
      const uint8_t *m = pb.maskOf(b);
      int64_t lo, hi;
      pb.liveKeys(m, i0, i1, lo, hi);
      const int64_t n = std::max<int64_t>(0, hi - lo);
      scores.resize(size_t((i1 - i0) * n));
      productRows(x.q + (b * s.sq + i0) * s.d, s.d, i1 - i0, s.d,
                  x.kt + b * s.d * s.sk + lo, s.sk, n, scores.data());
      for (int64_t i = i0; i < i1; ++i) {
        C *row = scores.data() + (i - i0) * n;
        C max = -inf;
        for (int64_t j = 0; j < n; ++j) {
          C sv = m && m[i * s.sk + lo + j] ? pb.maskValue : pb.scale * row[j];
          row[j] = sv;
          max = sv > max ? sv : max;
        }
        C *out = x.out + (b * s.sq + i) * s.dv;
        if (max == -inf) { // every score -inf: softmax is 0/0
          std::fill(out, out + s.dv, std::numeric_limits<C>::quiet_NaN());
          x.lse[b * s.sq + i] = -inf;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          row[j] = expShift(row[j], max);
          sum += row[j];
        }
        const C l = C(sum);
        for (int64_t j = 0; j < n; ++j)
          row[j] = roundLike(row[j] / l, pb.bf16);
        weightedSum(row, n, x.v + (b * s.sk + lo) * s.dv, s.dv, s.dv,
                    acc.data());
        std::copy(acc.begin(), acc.end(), out);
        x.lse[b * s.sq + i] = max + C(std::log(sum));
      }
    }
  }
}

template <typename C> struct BackwardOperands {
  const C *q, *k, *v, *dout, *lse, *delta;
  /// Transposed: [batch][D][Sq], [batch][D][Sk], [batch][Dv][Sq],
  /// [batch][Dv][Sk].
  const C *qt, *kt, *doutT, *vt;
  C *dq, *dk, *dv;
};

/// dq, over (batch, block of query rows).
template <typename C>
void backwardQueries(const Problem<C> &pb, const BackwardOperands<C> &x) {
  const AttentionShape &s = pb.s;
  const int64_t blocks = (s.sq + kBlock - 1) / kBlock;
  const int threads =
      threadsFor(s.batch * s.sq * s.sk * (s.d + s.dv), int64_t(1) << 16);
#pragma omp parallel num_threads(threads)
  {
    std::vector<C> scores, dp, acc(size_t(s.d));
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < s.batch * blocks; ++item) {
      const int64_t b = item / blocks;
      const int64_t i0 = (item % blocks) * kBlock,
                    i1 = std::min(s.sq, i0 + kBlock);
      const uint8_t *m = pb.maskOf(b);
      int64_t lo, hi;
      pb.liveKeys(m, i0, i1, lo, hi);
      const int64_t n = std::max<int64_t>(0, hi - lo);
      scores.resize(size_t((i1 - i0) * n));
      dp.resize(size_t((i1 - i0) * n));
      productRows(x.q + (b * s.sq + i0) * s.d, s.d, i1 - i0, s.d,
                  x.kt + b * s.d * s.sk + lo, s.sk, n, scores.data());
      productRows(x.dout + (b * s.sq + i0) * s.dv, s.dv, i1 - i0, s.dv,
                  x.vt + b * s.dv * s.sk + lo, s.sk, n, dp.data());
      for (int64_t i = i0; i < i1; ++i) {
        C *row = scores.data() + (i - i0) * n;
        const C *dpRow = dp.data() + (i - i0) * n;
        const C lse = x.lse[b * s.sq + i], delta = x.delta[b * s.sq + i];
        for (int64_t j = 0; j < n; ++j) {
          bool masked = m && m[i * s.sk + lo + j];
          C p = expShift(masked ? pb.maskValue : pb.scale * row[j], lse);
          row[j] = masked ? C(0) : roundLike(p * (dpRow[j] - delta), pb.bf16);
        }
        weightedSum(row, n, x.k + (b * s.sk + lo) * s.d, s.d, s.d, acc.data());
        C *dq = x.dq + (b * s.sq + i) * s.d;
        for (int64_t c = 0; c < s.d; ++c)
          dq[c] = pb.scale * acc[size_t(c)];
      }
    }
  }
}

/// dk and dv, over (batch, block of key rows).
template <typename C>
void backwardKeys(const Problem<C> &pb, const BackwardOperands<C> &x) {
  const AttentionShape &s = pb.s;
  const int64_t blocks = (s.sk + kBlock - 1) / kBlock;
  const int threads =
      threadsFor(s.batch * s.sq * s.sk * (s.d + s.dv), int64_t(1) << 16);
#pragma omp parallel num_threads(threads)
  {
    std::vector<C> scores, dp, accK(size_t(s.d)), accV(size_t(s.dv));
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < s.batch * blocks; ++item) {
      const int64_t b = item / blocks;
      const int64_t j0 = (item % blocks) * kBlock,
                    j1 = std::min(s.sk, j0 + kBlock);
      const uint8_t *m = pb.maskOf(b);
      int64_t lo, hi;
      pb.liveQueries(m, j0, j1, lo, hi);
      const int64_t n = std::max<int64_t>(0, hi - lo);
      scores.resize(size_t((j1 - j0) * n));
      dp.resize(size_t((j1 - j0) * n));
      productRows(x.k + (b * s.sk + j0) * s.d, s.d, j1 - j0, s.d,
                  x.qt + b * s.d * s.sq + lo, s.sq, n, scores.data());
      productRows(x.v + (b * s.sk + j0) * s.dv, s.dv, j1 - j0, s.dv,
                  x.doutT + b * s.dv * s.sq + lo, s.sq, n, dp.data());
      const C *lse = x.lse + b * s.sq + lo, *delta = x.delta + b * s.sq + lo;
      for (int64_t j = j0; j < j1; ++j) {
        C *p = scores.data() + (j - j0) * n; // s, then p~
        C *ds = dp.data() + (j - j0) * n;    // dp, then ds~
        for (int64_t i = 0; i < n; ++i) {
          bool masked = m && m[(lo + i) * s.sk + j];
          C pi = expShift(masked ? pb.maskValue : pb.scale * p[i], lse[i]);
          ds[i] = masked ? C(0) : roundLike(pi * (ds[i] - delta[i]), pb.bf16);
          p[i] = roundLike(pi, pb.bf16);
        }
        weightedSum(p, n, x.dout + (b * s.sq + lo) * s.dv, s.dv, s.dv,
                    accV.data());
        weightedSum(ds, n, x.q + (b * s.sq + lo) * s.d, s.d, s.d, accK.data());
        C *dk = x.dk + (b * s.sk + j) * s.d, *dv = x.dv + (b * s.sk + j) * s.dv;
        for (int64_t c = 0; c < s.d; ++c)
          dk[c] = pb.scale * accK[size_t(c)];
        std::copy(accV.begin(), accV.end(), dv);
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Entry points: bf16 operands are widened to f32 and the results rounded
//===----------------------------------------------------------------------===//

/// Where the kernels' head-major element e = (b * rows + i) * cols + c of
/// an operand with `rows` rows of `cols` is in the instruction's layout:
/// sequence positions are `stride` elements apart (H * cols seq-major,
/// cols head-major, 3 H cols packed) and the operand starts at `base`.
struct OperandLayout {
  const AttentionShape &s;
  int64_t rows, cols;
  int64_t stride = s.heads * cols, base = 0;
  int64_t count() const { return s.batch * rows * cols; }
  /// Where head-major row `row` = b * rows + i starts; its `cols` elements
  /// are contiguous in every layout. (Divisions per row, not per element:
  /// five of them per element were most of a small attention's time.)
  int64_t rowOffset(int64_t row) const {
    const int64_t b = row / rows, i = row % rows;
    return base + ((b / s.heads) * rows + i) * stride + (b % s.heads) * cols;
  }
};

/// The layout of part `part` (0: q, 1: k, 2: v, or their gradients).
OperandLayout qkvLayout(const AttentionShape &s, int part, int64_t rows,
                        int64_t cols) {
  return {s, rows, cols, s.qkvStride(cols), s.qkvBase(part, cols)};
}

/// An element of type T as the compute type C.
template <typename C, typename T> inline C computeValue(T x) {
  if constexpr (std::is_same_v<T, BF16>)
    return C(widenBF16(x));
  else
    return C(x);
}

/// An input in the compute type C and head-major: the buffer itself, or a
/// copy widened from bf16 and/or gathered from the seq-major layout. T is
/// the buffer's element type (C, or BF16 for a bf16 C = float).
template <typename C> class Input {
public:
  Input(const void *data, const OperandLayout &layout, bool bf16,
        ScratchScope &scratch) {
    if (!bf16 && !layout.s.seqMajor) {
      data_ = static_cast<const C *>(data);
      return;
    }
    wide_ = scratch.take<C>(size_t(layout.count()));
    if (bf16)
      gather(static_cast<const BF16 *>(data), layout);
    else
      gather(static_cast<const C *>(data), layout);
    data_ = wide_;
  }
  const C *get() const { return data_; }

private:
  template <typename T> void gather(const T *in, const OperandLayout &layout) {
    const int64_t rows = layout.s.batch * layout.rows, cols = layout.cols;
    int threads = threadsFor(layout.count(), 1 << 15);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const T *from = in + layout.rowOffset(row);
      C *to = wide_ + row * cols;
      for (int64_t c = 0; c < cols; ++c)
        to[c] = computeValue<C>(from[c]);
    }
  }

  const C *data_ = nullptr;
  C *wide_ = nullptr;
};

/// An output in the compute type C and head-major, rounded into a bf16
/// buffer and/or scattered into the seq-major layout by `finish`.
template <typename C> class Output {
public:
  Output(void *data, const OperandLayout &layout, bool bf16,
         ScratchScope &scratch)
      : target_(data), layout_(layout), bf16_(bf16) {
    if (!bf16 && !layout.s.seqMajor) {
      data_ = static_cast<C *>(data);
      return;
    }
    wide_ = scratch.take<C>(size_t(layout.count()));
    data_ = wide_;
  }
  C *get() { return data_; }
  void finish() {
    if (!wide_)
      return;
    if (bf16_)
      scatter(static_cast<BF16 *>(target_),
              [](C x) { return roundToBF16(float(x)); });
    else
      scatter(static_cast<C *>(target_), [](C x) { return x; });
  }

private:
  template <typename T, typename Convert>
  void scatter(T *out, Convert convert) {
    const int64_t rows = layout_.s.batch * layout_.rows, cols = layout_.cols;
    int threads = threadsFor(layout_.count(), 1 << 15);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      T *to = out + layout_.rowOffset(row);
      const C *from = wide_ + row * cols;
      for (int64_t c = 0; c < cols; ++c)
        to[c] = convert(from[c]);
    }
  }

  void *target_;
  OperandLayout layout_;
  bool bf16_;
  C *data_ = nullptr;
  C *wide_ = nullptr;
};

/// delta[r] = x[r] . y[r] over rows of `cols`: products in C, as the
/// elementwise multiply of the unfused form, summed in f64 as its f32
/// reduce_sum does.
template <typename C>
C *rowDots(const C *x, const C *y, int64_t rows, int64_t cols,
           ScratchScope &scratch) {
  C *dots = scratch.take<C>(size_t(rows));
  int threads = threadsFor(rows * cols, 1 << 15);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      sum += double(C(x[r * cols + c] * y[r * cols + c]));
    dots[r] = C(sum);
  }
  return dots;
}

template <typename C>
C *transposed(const C *in, int64_t batch, int64_t rows, int64_t cols,
              ScratchScope &scratch) {
  C *out = scratch.take<C>(size_t(batch * rows * cols));
  transposeBatches(in, out, batch, rows, cols);
  return out;
}

template <typename C>
void runForward(const AttentionShape &s, const KernelArgs &args) {
  ScratchScope scratch;
  const bool bf16 = s.dtype == DType::BF16;
  Problem<C> pb(s, s.hasMask ? args.inputs[s.maskInput] : nullptr);
  // A packed qkv is the one input of all three.
  const size_t kInput = s.packed ? 0 : 1, vInput = s.packed ? 0 : 2;
  Input<C> q(args.inputs[0], qkvLayout(s, 0, s.sq, s.d), bf16, scratch);
  Input<C> k(args.inputs[kInput], qkvLayout(s, 1, s.sk, s.d), bf16, scratch);
  Input<C> v(args.inputs[vInput], qkvLayout(s, 2, s.sk, s.dv), bf16, scratch);
  Output<C> out(args.outputs[0], {s, s.sq, s.dv}, bf16, scratch);
  Output<C> lse(args.outputs[1], {s, s.sq, 1}, false, scratch);
  C *kt = transposed(k.get(), s.batch, s.sk, s.d, scratch);
  ForwardOperands<C> x{q.get(), kt, v.get(), out.get(), lse.get()};
  forward(pb, x);
  out.finish();
  lse.finish();
}

template <typename C>
void runBackward(const AttentionShape &s, const KernelArgs &args) {
  ScratchScope scratch;
  const bool bf16 = s.dtype == DType::BF16;
  Problem<C> pb(s, s.hasMask ? args.inputs[s.maskInput] : nullptr);
  // A packed qkv (dqkv) is the one input (output) of all three.
  const size_t kInput = s.packed ? 0 : 1, vInput = s.packed ? 0 : 2;
  Input<C> q(args.inputs[0], qkvLayout(s, 0, s.sq, s.d), bf16, scratch);
  Input<C> k(args.inputs[kInput], qkvLayout(s, 1, s.sk, s.d), bf16, scratch);
  Input<C> v(args.inputs[vInput], qkvLayout(s, 2, s.sk, s.dv), bf16, scratch);
  Input<C> dout(args.inputs[s.doutInput], {s, s.sq, s.dv}, bf16, scratch);
  Input<C> lse(args.inputs[s.lseInput], {s, s.sq, 1}, false, scratch);
  Input<C> out(args.inputs[s.outInput], {s, s.sq, s.dv}, bf16, scratch);
  C *delta = rowDots(dout.get(), out.get(), s.batch * s.sq, s.dv, scratch);
  Output<C> dq(args.outputs[0], qkvLayout(s, 0, s.sq, s.d), bf16, scratch);
  Output<C> dk(args.outputs[kInput], qkvLayout(s, 1, s.sk, s.d), bf16, scratch);
  Output<C> dv(args.outputs[vInput], qkvLayout(s, 2, s.sk, s.dv), bf16,
               scratch);
  C *qt = transposed(q.get(), s.batch, s.sq, s.d, scratch);
  C *kt = transposed(k.get(), s.batch, s.sk, s.d, scratch);
  C *doutT = transposed(dout.get(), s.batch, s.sq, s.dv, scratch);
  C *vt = transposed(v.get(), s.batch, s.sk, s.dv, scratch);
  BackwardOperands<C> x{q.get(),  k.get(),  v.get(), dout.get(), lse.get(),
                        delta,    qt,       kt,      doutT,      vt,
                        dq.get(), dk.get(), dv.get()};
  backwardQueries(pb, x);
  backwardKeys(pb, x);
  dq.finish();
  dk.finish();
  dv.finish();
}

} // namespace

Status cpu::check_attention(const Instruction &instruction) {
  AttentionShape s;
  return readAttention(instruction, false, s);
}

void cpu::run_attention(const KernelArgs &args) {
  AttentionShape s;
  (void)readAttention(args.instruction, false, s);
  if (s.dtype == DType::F64)
    runForward<double>(s, args);
  else
    runForward<float>(s, args);
}

Status cpu::check_attention_backward(const Instruction &instruction) {
  AttentionShape s;
  return readAttention(instruction, true, s);
}

void cpu::run_attention_backward(const KernelArgs &args) {
  AttentionShape s;
  (void)readAttention(args.instruction, true, s);
  if (s.dtype == DType::F64)
    runBackward<double>(s, args);
  else
    runBackward<float>(s, args);
}
