//===- OpUtils.cpp - Helpers shared by loom op implementations ------------===//

#include "OpUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {
namespace opimpl {

FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                std::string &error) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Walk from the trailing dimension; a missing dimension acts as 1.
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1) {
      llvm::raw_string_ostream os(error);
      os << "shapes " << formatShape(lhs) << " and " << formatShape(rhs)
         << " do not broadcast: trailing dimension " << i << " is " << l
         << " vs " << r;
      return failure();
    }
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

bool isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  return llvm::all_of(llvm::seq<size_t>(0, from.size()), [&](size_t i) {
    return from[i] == to[offset + i] || from[i] == 1;
  });
}

bool isValidAxis(int64_t axis, int64_t rank) {
  return axis >= 0 && axis < rank;
}

std::string formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

} // namespace opimpl
} // namespace loom
} // namespace mlir
