//===- ElementwiseSpace.cpp - Where an elementwise kernel iterates --------===//

#include "ElementwiseSpace.h"

using namespace loomrt;

ElementwiseSpace loomrt::elementwiseSpace(const Instruction &instruction) {
  using InputKind = ElementwiseSpace::InputKind;
  ElementwiseSpace space;
  const std::vector<int64_t> &out = instruction.outputs[0].shape;
  size_t rank = out.size(), inputs = instruction.inputs.size();
  space.total = numElements(out);
  // Per input, row-major strides aligned to the output's trailing dims.
  std::vector<std::vector<int64_t>> full(inputs, std::vector<int64_t>(rank, 0));
  for (size_t i = 0; i < inputs; ++i) {
    const std::vector<int64_t> &shape = instruction.inputs[i].shape;
    size_t offset = rank - shape.size();
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      full[i][offset + d] = shape[d] == 1 ? 0 : stride;
      stride *= shape[d];
    }
  }
  space.strides.assign(inputs, {});
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !space.shape.empty();
    for (size_t i = 0; merge && i < inputs; ++i)
      merge = space.strides[i].back() == full[i][d] * out[d];
    if (merge) {
      space.shape.back() *= out[d];
      for (size_t i = 0; i < inputs; ++i)
        space.strides[i].back() = full[i][d];
      continue;
    }
    space.shape.push_back(out[d]);
    for (size_t i = 0; i < inputs; ++i)
      space.strides[i].push_back(full[i][d]);
  }
  for (size_t i = 0; i < inputs; ++i) {
    int64_t elements = instruction.inputs[i].elements();
    space.kinds.push_back(elements == space.total ? InputKind::Dense
                          : elements == 1         ? InputKind::Scalar
                                                  : InputKind::Strided);
  }
  return space;
}
