//===- ConstantFold.cpp - Folding loom ops on constant tensors ------------===//

#include "ConstantFold.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::opimpl;

namespace {
/// The elements of a `dense` constant, read once.
struct Elements {
  llvm::SmallVector<Scalar> values; // One entry if splat.
  llvm::SmallVector<int64_t> shape;
  bool splat = false;

  const Scalar &at(int64_t linear) const { return values[splat ? 0 : linear]; }
};
} // namespace

static Scalar readFloat(const llvm::APFloat &value) {
  llvm::APFloat copy = value;
  bool losesInfo;
  copy.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
               &losesInfo);
  return Scalar::ofFloat(copy.convertToDouble());
}

static Scalar readInt(const llvm::APInt &value) {
  // i1 is a boolean (0 or 1), wider integers are signed.
  return Scalar::ofInt(value.getBitWidth() == 1 ? value.getZExtValue()
                                                : value.getSExtValue());
}

static std::optional<Elements> readElements(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  Elements elements;
  elements.shape.assign(dense.getType().getShape().begin(),
                        dense.getType().getShape().end());
  elements.splat = dense.isSplat();
  if (!elements.splat && dense.getNumElements() > kMaxFoldedElements)
    return std::nullopt;
  bool isFloat = isa<FloatType>(dense.getElementType());
  if (elements.splat) {
    elements.values.push_back(isFloat
                                  ? readFloat(dense.getSplatValue<APFloat>())
                                  : readInt(dense.getSplatValue<APInt>()));
    return elements;
  }
  if (isFloat) {
    for (const APFloat &value : dense.getValues<APFloat>())
      elements.values.push_back(readFloat(value));
  } else {
    for (const APInt &value : dense.getValues<APInt>())
      elements.values.push_back(readInt(value));
  }
  return elements;
}

/// Builds a `dense` attribute of `type` from one value per element, or from
/// a single value for a splat.
static Attribute makeDense(ShapedType type, llvm::ArrayRef<Scalar> values) {
  Type elementType = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    llvm::SmallVector<APFloat> floats;
    floats.reserve(values.size());
    for (const Scalar &value : values) {
      APFloat converted(value.f);
      bool losesInfo;
      converted.convert(floatType.getFloatSemantics(),
                        APFloat::rmNearestTiesToEven, &losesInfo);
      floats.push_back(converted);
    }
    // A single value makes a splat.
    return DenseElementsAttr::get(type, floats);
  }
  unsigned width = elementType.getIntOrFloatBitWidth();
  llvm::SmallVector<APInt> ints;
  ints.reserve(values.size());
  for (const Scalar &value : values) {
    // Wrap around like the runtime's two's-complement arithmetic.
    APInt wide(64, static_cast<uint64_t>(value.i), /*isSigned=*/true);
    ints.push_back(width == 1 ? APInt(1, value.i != 0) : wide.trunc(width));
  }
  return DenseElementsAttr::get(type, ints);
}

SmallVector<int64_t> opimpl::delinearize(int64_t linear,
                                         ArrayRef<int64_t> shape) {
  SmallVector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

int64_t opimpl::linearize(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t linear = 0;
  for (auto [i, size] : llvm::zip(index, shape))
    linear = linear * size + i;
  return linear;
}

/// Maps a result element to the element of a numpy-broadcast operand.
static int64_t broadcastSource(ArrayRef<int64_t> resultIndex,
                               ArrayRef<int64_t> operandShape) {
  size_t offset = resultIndex.size() - operandShape.size();
  int64_t linear = 0;
  for (auto [d, size] : llvm::enumerate(operandShape))
    linear = linear * size + (size == 1 ? 0 : resultIndex[offset + d]);
  return linear;
}

Attribute opimpl::foldElementwise(ArrayRef<Attribute> operands,
                                  ShapedType resultType, ScalarFn fn) {
  SmallVector<Elements> inputs;
  for (Attribute operand : operands) {
    std::optional<Elements> elements = readElements(operand);
    if (!elements)
      return {};
    inputs.push_back(std::move(*elements));
  }
  bool allSplat =
      llvm::all_of(inputs, [](const Elements &e) { return e.splat; });
  int64_t count = allSplat ? 1 : resultType.getNumElements();
  if (count < 0 || count > kMaxFoldedElements)
    return {};

  SmallVector<Scalar> results;
  results.reserve(count);
  SmallVector<Scalar> arguments(inputs.size());
  for (int64_t linear = 0; linear < count; ++linear) {
    SmallVector<int64_t> index =
        allSplat ? SmallVector<int64_t>()
                 : delinearize(linear, resultType.getShape());
    for (auto [argument, input] : llvm::zip(arguments, inputs))
      argument = input.splat ? input.values.front()
                             : input.at(broadcastSource(index, input.shape));
    std::optional<Scalar> value = fn(arguments);
    if (!value)
      return {};
    results.push_back(*value);
  }
  return makeDense(resultType, results);
}

bool opimpl::isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return readFloat(dense.getSplatValue<APFloat>()).f == value;
  return static_cast<double>(readInt(dense.getSplatValue<APInt>()).i) == value;
}

Attribute opimpl::foldRearrange(
    ArrayRef<Attribute> inputs, ShapedType resultType,
    llvm::function_ref<std::pair<unsigned, int64_t>(int64_t)> pick) {
  SmallVector<DenseElementsAttr> dense;
  for (Attribute input : inputs) {
    auto attr = dyn_cast_or_null<DenseElementsAttr>(input);
    if (!attr)
      return {};
    dense.push_back(attr);
  }
  if (dense.size() == 1 && dense.front().isSplat())
    return DenseElementsAttr::get(resultType,
                                  dense.front().getSplatValue<Attribute>());
  int64_t count = resultType.getNumElements();
  if (count < 0 || count > kMaxFoldedElements)
    return {};
  SmallVector<Attribute> values;
  values.reserve(count);
  for (int64_t linear = 0; linear < count; ++linear) {
    auto [input, index] = pick(linear);
    values.push_back(dense[input].getValues<Attribute>()[index]);
  }
  return DenseElementsAttr::get(resultType, values);
}
