//===- ReshapeFactorization.cpp - Common factors of two shapes ------------===//

#include "loom/Support/ReshapeFactorization.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include <algorithm>
#include <cassert>

using namespace mlir::loom;

namespace {
/// A run of dimensions on both sides whose element counts are equal.
struct Group {
  size_t inputBegin, inputEnd, outputBegin, outputEnd;
};
} // namespace

/// Gives every dimension of size != 1 in [begin, end) its own unsplittable
/// factor.
static void
addWholeFactors(ReshapeFactorization &result, llvm::ArrayRef<int64_t> shape,
                size_t begin, size_t end,
                llvm::SmallVectorImpl<llvm::SmallVector<unsigned, 2>> &dims) {
  for (size_t d = begin; d < end; ++d) {
    if (shape[d] == 1)
      continue;
    dims[d].push_back(result.factors.size());
    result.factors.push_back({shape[d], /*splittable=*/false});
  }
}

/// Cumulative sizes of `shape[begin, end)` from the major side.
static llvm::SmallVector<int64_t> cumulativeSizes(llvm::ArrayRef<int64_t> shape,
                                                  size_t begin, size_t end) {
  llvm::SmallVector<int64_t> sizes;
  int64_t product = 1;
  for (size_t d = begin; d < end; ++d) {
    product *= shape[d];
    sizes.push_back(product);
  }
  return sizes;
}

/// Assigns factors to the dimensions of one side of a refined group: a
/// dimension spanning cumulative sizes (start, end] gets every factor whose
/// boundaries lie in that range.
static void
assignFactors(llvm::ArrayRef<int64_t> shape, size_t begin, size_t end,
              llvm::ArrayRef<int64_t> boundaries, unsigned firstFactor,
              llvm::SmallVectorImpl<llvm::SmallVector<unsigned, 2>> &dims) {
  int64_t start = 1;
  for (size_t d = begin; d < end; ++d) {
    int64_t stop = start * shape[d];
    for (auto [k, boundary] : llvm::enumerate(boundaries)) {
      int64_t previous = k == 0 ? 1 : boundaries[k - 1];
      if (previous >= start && boundary <= stop)
        dims[d].push_back(firstFactor + k);
    }
    start = stop;
  }
}

static void factorizeGroup(ReshapeFactorization &result,
                           llvm::ArrayRef<int64_t> input,
                           llvm::ArrayRef<int64_t> output, const Group &group) {
  llvm::SmallVector<int64_t> boundaries =
      cumulativeSizes(input, group.inputBegin, group.inputEnd);
  llvm::append_range(
      boundaries, cumulativeSizes(output, group.outputBegin, group.outputEnd));
  llvm::sort(boundaries);
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()),
                   boundaries.end());
  if (!boundaries.empty() && boundaries.front() == 1)
    boundaries.erase(boundaries.begin()); // From size-1 leading dimensions.

  bool isChain =
      llvm::all_of(llvm::seq<size_t>(1, boundaries.size()), [&](size_t k) {
        return boundaries[k] % boundaries[k - 1] == 0;
      });
  if (!isChain) {
    addWholeFactors(result, input, group.inputBegin, group.inputEnd,
                    result.inputDims);
    addWholeFactors(result, output, group.outputBegin, group.outputEnd,
                    result.outputDims);
    return;
  }
  unsigned firstFactor = result.factors.size();
  int64_t previous = 1;
  for (int64_t boundary : boundaries) {
    result.factors.push_back({boundary / previous, /*splittable=*/true});
    previous = boundary;
  }
  assignFactors(input, group.inputBegin, group.inputEnd, boundaries,
                firstFactor, result.inputDims);
  assignFactors(output, group.outputBegin, group.outputEnd, boundaries,
                firstFactor, result.outputDims);
}

ReshapeFactorization
mlir::loom::factorizeReshape(llvm::ArrayRef<int64_t> input,
                             llvm::ArrayRef<int64_t> output) {
  ReshapeFactorization result;
  result.inputDims.resize(input.size());
  result.outputDims.resize(output.size());

  // With zero elements no cumulative sizes line up; keep every dimension
  // whole.
  if (llvm::is_contained(input, 0) || llvm::is_contained(output, 0)) {
    addWholeFactors(result, input, 0, input.size(), result.inputDims);
    addWholeFactors(result, output, 0, output.size(), result.outputDims);
    return result;
  }

  size_t i = 0, j = 0;
  while (true) {
    // Size-1 dimensions between groups map to no factor.
    while (i < input.size() && input[i] == 1)
      ++i;
    while (j < output.size() && output[j] == 1)
      ++j;
    if (i == input.size() || j == output.size())
      break;
    Group group{i, i + 1, j, j + 1};
    int64_t inputSize = input[i], outputSize = output[j];
    while (inputSize != outputSize) {
      if (inputSize < outputSize) {
        assert(group.inputEnd < input.size() && "element counts differ");
        inputSize *= input[group.inputEnd++];
      } else {
        assert(group.outputEnd < output.size() && "element counts differ");
        outputSize *= output[group.outputEnd++];
      }
    }
    factorizeGroup(result, input, output, group);
    i = group.inputEnd;
    j = group.outputEnd;
  }
  assert(llvm::all_of(input.drop_front(i), [](int64_t s) { return s == 1; }) &&
         llvm::all_of(output.drop_front(j), [](int64_t s) { return s == 1; }) &&
         "element counts differ");
  return result;
}
