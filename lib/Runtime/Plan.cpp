//===- Plan.cpp - Element types and shapes of the runtime plan ------------===//

#include "loom/Runtime/Plan.h"

#include <cstring>

using namespace loomrt;

namespace {
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2}, {DType::F32, "f32", 4},
    {DType::F64, "f64", 8}, {DType::I1, "i1", 1},     {DType::I32, "i32", 4},
    {DType::I64, "i64", 8},
};
} // namespace

size_t loomrt::dtypeSize(DType dtype) {
  return kDTypes[static_cast<int>(dtype)].size;
}

const char *loomrt::dtypeName(DType dtype) {
  return kDTypes[static_cast<int>(dtype)].name;
}

bool loomrt::parseDType(std::string_view name, DType &dtype) {
  for (const DTypeInfo &info : kDTypes) {
    if (name == info.name) {
      dtype = info.dtype;
      return true;
    }
  }
  return false;
}

int64_t loomrt::numElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

std::string loomrt::shapeString(const std::vector<int64_t> &shape) {
  std::string result = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      result += ",";
    result += std::to_string(shape[i]);
  }
  return result + "]";
}
