//===- Reduce.cpp - The CPU reduction kernels -----------------------------===//
//
// reduce_sum, reduce_mean and reduce_max over a set of axes. After dropping
// size-1 dims and merging neighbouring dims that are both reduced or both
// kept, most reductions are (outer, reduced, inner) blocks: trailing axes
// (inner = 1, one contiguous run per output) or a middle block (each output
// row accumulates `reduced` contiguous rows of `inner` elements, which
// vectorizes). Other patterns use a general loop over output elements.
//
// f32 sums accumulate in double; integer sums wrap like two's complement.
// reduce_sum also reads bf16 into an f32 result: the input is widened
// (exactly) into a buffer and summed as f32, so the result is the f32 sum's.
// reduce_max propagates NaN. An empty reduction gives 0 (sum), NaN (mean) or
// the lowest value (max).
//
//===----------------------------------------------------------------------===//

#include "../CumsumLine.h"
#include "BFloat16.h"
#include "CPUKernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

enum class ReduceKind { Sum, Mean, Max };

Status readAxes(const Instruction &instruction, ReduceKind kind,
                std::vector<bool> &reduced) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s = expectKnownAttrs(instruction.attrs, {"axes"}); !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (kind == ReduceKind::Sum && x.dtype == DType::BF16) {
    if (y.dtype != DType::F32)
      return Status::error(std::string("result has dtype ") +
                           dtypeName(y.dtype) +
                           "; a sum of bf16 is f32 (bf16 results are not "
                           "supported)");
  } else if (kind == ReduceKind::Mean) {
    if (Status s = expectFloat(x.dtype, "input"); !s)
      return s;
  } else if (x.dtype != DType::F32 && x.dtype != DType::F64 &&
             x.dtype != DType::I32 && x.dtype != DType::I64) {
    return Status::error(std::string("input has dtype ") + dtypeName(x.dtype) +
                         "; only f32, f64, i32 and i64 are supported");
  }
  if (x.dtype != DType::BF16)
    if (Status s = expectSameDType(x, "input", y, "result"); !s)
      return s;
  std::vector<int64_t> axes;
  if (Status s = getIntListAttr(instruction.attrs, "axes", axes, true); !s)
    return s;
  int64_t rank = int64_t(x.shape.size());
  reduced.assign(size_t(rank), false);
  for (int64_t axis : axes) {
    int64_t normalized;
    if (Status s = normalizeAxis(axis, rank, normalized); !s)
      return s;
    reduced[size_t(normalized)] = true;
  }
  // Y is X without the reduced dims, or with size 1 there.
  std::vector<int64_t> dropped, kept;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d])
      dropped.push_back(x.shape[d]);
  }
  if (y.shape != dropped && y.shape != kept)
    return Status::error("result " + shapeString(y.shape) + " should be " +
                         shapeString(dropped) + " or " + shapeString(kept) +
                         " for input " + shapeString(x.shape) +
                         " reduced over axes " + shapeString(axes));
  return Status::ok();
}

/// The accumulator type: double for floats (f32 sums keep their precision),
/// int64 for integers.
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T, ReduceKind K> struct Reducer {
  using A = std::conditional_t<K == ReduceKind::Max, T, Acc<T>>;
  static A identity() {
    if constexpr (K != ReduceKind::Max)
      return A(0);
    else if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  static A combine(A acc, T x) {
    if constexpr (K != ReduceKind::Max) {
      if constexpr (std::is_floating_point_v<T>)
        return acc + A(x);
      else // wrapping
        return A(uint64_t(acc) + uint64_t(int64_t(x)));
    } else {
      return (acc != acc || acc > x) ? acc : x; // NaN propagates
    }
  }
  static T finish(A acc, int64_t count) {
    if constexpr (K == ReduceKind::Mean)
      return T(acc / A(count)); // 0/0 = NaN for an empty mean
    else if constexpr (std::is_floating_point_v<T>)
      return T(acc);
    else
      return T(uint64_t(acc)); // wrap to T's width
  }
  /// Reduces n contiguous elements. Sums use four partial accumulators so the
  /// adds pipeline.
  static A row(const T *x, int64_t n) {
    if constexpr (K == ReduceKind::Max) {
      A acc = identity();
      for (int64_t i = 0; i < n; ++i)
        acc = combine(acc, x[i]);
      return acc;
    } else {
      A p[4] = {0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j)
          p[j] = combine(p[j], x[i + j]);
      for (; i < n; ++i)
        p[0] = combine(p[0], x[i]);
      if constexpr (std::is_floating_point_v<T>)
        return (p[0] + p[1]) + (p[2] + p[3]);
      else
        return A(uint64_t(p[0]) + uint64_t(p[1]) + uint64_t(p[2]) +
                 uint64_t(p[3]));
    }
  }
};

/// The reduction after merging dims: alternating groups of kept and reduced
/// dims, outermost first.
struct Groups {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
};

Groups mergeDims(const std::vector<int64_t> &shape,
                 const std::vector<bool> &reduced) {
  Groups groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!groups.sizes.empty() && groups.reduced.back() == reduced[d]) {
      groups.sizes.back() *= shape[d];
      continue;
    }
    groups.sizes.push_back(shape[d]);
    groups.reduced.push_back(reduced[d]);
  }
  return groups;
}

/// outer x reduced x inner, reducing the middle.
template <typename T, ReduceKind K>
void reduceBlock(const T *x, T *y, int64_t outer, int64_t red, int64_t inner) {
  using R = Reducer<T, K>;
  using A = typename R::A;
  if (inner == 1) {
    if (outer >= omp_get_max_threads() || red < (1 << 16)) {
      int threads = threadsFor(outer * red, 1 << 14);
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < outer; ++o)
        y[o] = R::finish(R::row(x + o * red, red), red);
      return;
    }
    // Few long rows: split each row over the threads.
    for (int64_t o = 0; o < outer; ++o) {
      const T *row = x + o * red;
      int threads = threadsFor(red, 1 << 14);
      std::vector<A> partial(size_t(threads), R::identity());
#pragma omp parallel num_threads(threads)
      {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t begin = red * t / n, end = red * (t + 1) / n;
        partial[t] = R::row(row + begin, end - begin);
      }
      A acc = partial[0];
      for (int t = 1; t < threads; ++t) {
        if constexpr (K == ReduceKind::Max)
          acc = R::combine(acc, partial[t]);
        else if constexpr (std::is_floating_point_v<T>)
          acc += partial[t];
        else
          acc = A(uint64_t(acc) + uint64_t(partial[t]));
      }
      y[o] = R::finish(acc, red);
    }
    return;
  }
  // Each work item accumulates a chunk of one output row across `red` rows.
  constexpr int64_t kChunk = 256;
  int64_t chunks = (inner + kChunk - 1) / kChunk;
  int threads = threadsFor(outer * red * inner, 1 << 14);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t item = 0; item < outer * chunks; ++item) {
    int64_t o = item / chunks, j0 = (item % chunks) * kChunk;
    int64_t n = std::min(kChunk, inner - j0);
    A acc[kChunk];
    std::fill(acc, acc + n, R::identity());
    const T *base = x + o * red * inner + j0;
    for (int64_t r = 0; r < red; ++r) {
      const T *row = base + r * inner;
      for (int64_t j = 0; j < n; ++j)
        acc[j] = R::combine(acc[j], row[j]);
    }
    T *out = y + o * inner + j0;
    for (int64_t j = 0; j < n; ++j)
      out[j] = R::finish(acc[j], red);
  }
}

/// Any pattern: per output element, an odometer over the reduced dims.
template <typename T, ReduceKind K>
void reduceGeneral(const T *x, T *y, const Groups &groups) {
  using R = Reducer<T, K>;
  std::vector<int64_t> strides = contiguousStrides(groups.sizes);
  std::vector<int64_t> keptSizes, keptStrides, redSizes, redStrides;
  for (size_t g = 0; g < groups.sizes.size(); ++g) {
    (groups.reduced[g] ? redSizes : keptSizes).push_back(groups.sizes[g]);
    (groups.reduced[g] ? redStrides : keptStrides).push_back(strides[g]);
  }
  int64_t outputs = numElements(keptSizes), count = numElements(redSizes);
  int threads = threadsFor(outputs * count, 1 << 14);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t o = 0; o < outputs; ++o) {
    int64_t base = 0, rest = o;
    for (size_t d = keptSizes.size(); d-- > 0;) {
      base += (rest % keptSizes[d]) * keptStrides[d];
      rest /= keptSizes[d];
    }
    typename R::A acc = R::identity();
    std::vector<int64_t> index(redSizes.size(), 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = base;
      for (size_t d = 0; d < index.size(); ++d)
        offset += index[d] * redStrides[d];
      acc = R::combine(acc, x[offset]);
      for (size_t d = index.size(); d-- > 0;) {
        if (++index[d] < redSizes[d])
          break;
        index[d] = 0;
      }
    }
    y[o] = R::finish(acc, count);
  }
}

template <typename T, ReduceKind K>
void reduceTyped(const T *x, T *y, const std::vector<int64_t> &shape,
                 const std::vector<bool> &reduced) {
  Groups groups = mergeDims(shape, reduced);
  size_t n = groups.sizes.size();
  // (outer, reduced, inner) when at most one reduced group exists.
  int reducedGroups = 0;
  size_t redAt = 0;
  for (size_t g = 0; g < n; ++g)
    if (groups.reduced[g]) {
      ++reducedGroups;
      redAt = g;
    }
  if (reducedGroups == 0) {
    // Nothing (or only size-1 dims) reduced.
    std::memcpy(y, x, size_t(numElements(shape)) * sizeof(T));
    return;
  }
  if (reducedGroups == 1) {
    int64_t outer = dimProduct(groups.sizes, 0, redAt);
    int64_t inner = dimProduct(groups.sizes, redAt + 1, n);
    reduceBlock<T, K>(x, y, outer, groups.sizes[redAt], inner);
    return;
  }
  reduceGeneral<T, K>(x, y, groups);
}

template <typename T, ReduceKind K>
void reduceArgs(const KernelArgs &args, const std::vector<bool> &reduced) {
  reduceTyped<T, K>(static_cast<const T *>(args.inputs[0]),
                    static_cast<T *>(args.outputs[0]),
                    args.instruction.inputs[0].shape, reduced);
}

template <ReduceKind K> void runReduce(const KernelArgs &args) {
  std::vector<bool> reduced;
  (void)readAxes(args.instruction, K, reduced); // validated by check
  const std::vector<int64_t> &shape = args.instruction.inputs[0].shape;
  switch (args.instruction.inputs[0].dtype) {
  case DType::F32:
    return reduceArgs<float, K>(args, reduced);
  case DType::F64:
    return reduceArgs<double, K>(args, reduced);
  case DType::BF16: {
    std::vector<float> wide(static_cast<size_t>(numElements(shape)));
    widenBF16(static_cast<const BF16 *>(args.inputs[0]), wide.data(),
              int64_t(wide.size()));
    return reduceTyped<float, K>(
        wide.data(), static_cast<float *>(args.outputs[0]), shape, reduced);
  }
  case DType::I32:
    if constexpr (K != ReduceKind::Mean)
      return reduceArgs<int32_t, K>(args, reduced);
    return;
  case DType::I64:
    if constexpr (K != ReduceKind::Mean)
      return reduceArgs<int64_t, K>(args, reduced);
    return;
  default:
    return;
  }
}

} // namespace

Status cpu::check_reduce_sum(const Instruction &instruction) {
  std::vector<bool> reduced;
  return readAxes(instruction, ReduceKind::Sum, reduced);
}
Status cpu::check_reduce_mean(const Instruction &instruction) {
  std::vector<bool> reduced;
  return readAxes(instruction, ReduceKind::Mean, reduced);
}
Status cpu::check_reduce_max(const Instruction &instruction) {
  std::vector<bool> reduced;
  return readAxes(instruction, ReduceKind::Max, reduced);
}
void cpu::run_reduce_sum(const KernelArgs &args) {
  runReduce<ReduceKind::Sum>(args);
}
void cpu::run_reduce_mean(const KernelArgs &args) {
  runReduce<ReduceKind::Mean>(args);
}
void cpu::run_reduce_max(const KernelArgs &args) {
  runReduce<ReduceKind::Max>(args);
}

//===----------------------------------------------------------------------===//
// cumsum
//===----------------------------------------------------------------------===//

namespace {

struct CumsumShape {
  int64_t outer = 1, n = 0, inner = 1;
  bool exclusive = false, reverse = false;
};

Status readCumsum(const Instruction &instruction, CumsumShape &shape) {
  if (Status s = expectOperandCounts(instruction, 1, 1); !s)
    return s;
  if (Status s =
          expectKnownAttrs(instruction.attrs, {"axis", "exclusive", "reverse"});
      !s)
    return s;
  const TensorRef &x = instruction.inputs[0], &y = instruction.outputs[0];
  if (x.dtype != DType::F32 && x.dtype != DType::F64 && x.dtype != DType::I32 &&
      x.dtype != DType::I64)
    return Status::error(std::string("input has dtype ") + dtypeName(x.dtype) +
                         "; only f32, f64, i32 and i64 are supported");
  if (Status s = expectSameDType(x, "input", y, "result"); !s)
    return s;
  if (Status s = expectSameShape(x, "input", y, "result"); !s)
    return s;
  int64_t axis = 0, exclusive = 0, reverse = 0;
  if (Status s = getIntAttr(instruction.attrs, "axis", axis, true); !s)
    return s;
  if (Status s = getIntAttr(instruction.attrs, "exclusive", exclusive, false);
      !s)
    return s;
  if (Status s = getIntAttr(instruction.attrs, "reverse", reverse, false); !s)
    return s;
  int64_t rank = int64_t(x.shape.size());
  if (Status s = normalizeAxis(axis, rank, axis); !s)
    return s;
  shape.n = x.shape[size_t(axis)];
  for (int64_t d = 0; d < rank; ++d)
    if (d < axis)
      shape.outer *= x.shape[size_t(d)];
    else if (d > axis)
      shape.inner *= x.shape[size_t(d)];
  shape.exclusive = exclusive != 0;
  shape.reverse = reverse != 0;
  return Status::ok();
}

/// One line per OpenMP iteration, each CumsumLine.h's scan, which the CUDA
/// kernel runs too: both give the same bits.
template <typename T>
void cumsumTyped(const CumsumShape &p, const void *input, void *output) {
  const T *x = static_cast<const T *>(input);
  T *y = static_cast<T *>(output);
  const int64_t lines = p.outer * p.inner;
  int threads = threadsFor(lines * p.n, 1 << 15);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t start = (line / p.inner) * p.n * p.inner + line % p.inner;
    cumsumLine(x + start, y + start, p.n, p.inner, p.exclusive, p.reverse);
  }
}

} // namespace

Status cpu::check_cumsum(const Instruction &instruction) {
  CumsumShape shape;
  return readCumsum(instruction, shape);
}

void cpu::run_cumsum(const KernelArgs &args) {
  CumsumShape shape;
  (void)readCumsum(args.instruction, shape); // checked when loaded
  switch (args.instruction.inputs[0].dtype) {
  case DType::F32:
    return cumsumTyped<float>(shape, args.inputs[0], args.outputs[0]);
  case DType::F64:
    return cumsumTyped<double>(shape, args.inputs[0], args.outputs[0]);
  case DType::I32:
    return cumsumTyped<int32_t>(shape, args.inputs[0], args.outputs[0]);
  default:
    return cumsumTyped<int64_t>(shape, args.inputs[0], args.outputs[0]);
  }
}
