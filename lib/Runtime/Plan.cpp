//===- Plan.cpp - Element types and shapes of the runtime plan ------------===//

#include "loom/Runtime/Plan.h"

#include <algorithm>
#include <cstring>
#include <map>

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

std::string loomrt::sliceString(const std::vector<int64_t> &offsets,
                                const std::vector<int64_t> &globalShape) {
  if (globalShape.empty())
    return "";
  return "slice " + shapeString(offsets) + " of " + shapeString(globalShape);
}

void loomrt::forEachSliceRun(
    const std::vector<int64_t> &globalShape,
    const std::vector<int64_t> &offsets, const std::vector<int64_t> &shape,
    const std::function<void(int64_t, int64_t, int64_t)> &run) {
  size_t rank = shape.size();
  if (numElements(shape) == 0)
    return;
  if (rank == 0) {
    run(0, 0, 1);
    return;
  }
  // The part of the block inside the tensor: a block may reach past its
  // end (padding), which no run covers.
  std::vector<int64_t> inside(rank);
  for (size_t d = 0; d < rank; ++d) {
    inside[d] = std::clamp<int64_t>(globalShape[d] - offsets[d], 0, shape[d]);
    if (inside[d] == 0)
      return;
  }
  // Dimensions [split, rank) form one contiguous run: every dimension after
  // `split` is spanned whole by the block and by its part inside.
  size_t split = rank - 1;
  while (split > 0 && shape[split] == globalShape[split] &&
         inside[split] == shape[split])
    --split;
  int64_t count = inside[split];
  for (size_t d = split + 1; d < rank; ++d)
    count *= shape[d];
  std::vector<int64_t> strides(rank, 1), blockStrides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    strides[d - 1] = strides[d] * globalShape[d];
    blockStrides[d - 1] = blockStrides[d] * shape[d];
  }
  // An odometer over the inside part's dimensions before `split`.
  std::vector<int64_t> index(split, 0);
  while (true) {
    int64_t globalElement = offsets[split] * strides[split];
    int64_t sliceElement = 0;
    for (size_t d = 0; d < split; ++d) {
      globalElement += (offsets[d] + index[d]) * strides[d];
      sliceElement += index[d] * blockStrides[d];
    }
    run(globalElement, sliceElement, count);
    size_t d = split;
    while (d > 0 && ++index[d - 1] == inside[d - 1])
      index[--d] = 0;
    if (d == 0)
      return;
  }
}

bool loomrt::sliceOverhangs(const std::vector<int64_t> &globalShape,
                            const std::vector<int64_t> &offsets,
                            const std::vector<int64_t> &shape) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (offsets[d] + shape[d] > globalShape[d])
      return true;
  return false;
}

void loomrt::extractSlice(const uint8_t *whole, uint8_t *slice,
                          size_t elementBytes,
                          const std::vector<int64_t> &globalShape,
                          const std::vector<int64_t> &offsets,
                          const std::vector<int64_t> &shape) {
  // Padding past the tensor's end reads as zeros.
  if (sliceOverhangs(globalShape, offsets, shape))
    std::memset(slice, 0, size_t(numElements(shape)) * elementBytes);
  forEachSliceRun(globalShape, offsets, shape,
                  [&](int64_t from, int64_t to, int64_t count) {
                    std::memcpy(slice + size_t(to) * elementBytes,
                                whole + size_t(from) * elementBytes,
                                size_t(count) * elementBytes);
                  });
}

void loomrt::insertSlice(uint8_t *whole, const uint8_t *slice,
                         size_t elementBytes,
                         const std::vector<int64_t> &globalShape,
                         const std::vector<int64_t> &offsets,
                         const std::vector<int64_t> &shape) {
  forEachSliceRun(globalShape, offsets, shape,
                  [&](int64_t to, int64_t from, int64_t count) {
                    std::memcpy(whole + size_t(to) * elementBytes,
                                slice + size_t(from) * elementBytes,
                                size_t(count) * elementBytes);
                  });
}

Status loomrt::checkWeightSlices(const Plan &plan, size_t *culprit) {
  auto fail = [&](size_t id, const std::string &what) {
    if (culprit)
      *culprit = id;
    return Status::error(what);
  };
  auto describe = [&](size_t id) {
    const Weight &weight = plan.weights[id];
    std::string text = "weight " + std::to_string(id);
    if (weight.isSlice())
      text += " (" + sliceString(weight.sliceOffsets, weight.globalShape) + ")";
    return text;
  };
  // Each slice on its own: ranks agree, and it lies inside its tensor. The
  // weights of each name, names in the order of their first weight.
  std::map<std::string, size_t> nameIndex;
  std::vector<std::vector<size_t>> byName;
  for (size_t id = 0; id < plan.weights.size(); ++id) {
    const Weight &weight = plan.weights[id];
    auto [it, inserted] = nameIndex.try_emplace(weight.name, byName.size());
    if (inserted)
      byName.emplace_back();
    byName[it->second].push_back(id);
    if (!weight.isSlice() && weight.sliceOffsets.empty())
      continue;
    size_t rank = weight.shape.size();
    if (rank == 0 || weight.sliceOffsets.size() != rank ||
        weight.globalShape.size() != rank)
      return fail(id, "weight " + std::to_string(id) + " is a slice " +
                          shapeString(weight.sliceOffsets) + " of " +
                          shapeString(weight.globalShape) +
                          ", which does not have the rank of its shape " +
                          shapeString(weight.shape));
    // A block may reach past the tensor's end (padding: zeros when loaded,
    // dropped when gathered), but not begin before it.
    for (size_t d = 0; d < rank; ++d)
      if (weight.sliceOffsets[d] < 0 || weight.globalShape[d] < 0)
        return fail(id, describe(id) + " of shape " +
                            shapeString(weight.shape) +
                            " begins outside its tensor in dimension " +
                            std::to_string(d));
  }

  for (const std::vector<size_t> &ids : byName) {
    const Weight &first = plan.weights[ids.front()];
    const std::string &name = first.name;
    if (ids.size() == 1 && !first.isSlice())
      continue;
    for (size_t id : ids) {
      const Weight &weight = plan.weights[id];
      if (!weight.isSlice() || !first.isSlice())
        return fail(id == ids.front() ? ids[1] : id,
                    "weights " + std::to_string(ids.front()) + " and " +
                        std::to_string(id == ids.front() ? ids[1] : id) +
                        " are both named '" + name +
                        "', but only the slices of one tensor may share a "
                        "name");
      if (weight.dtype != first.dtype ||
          weight.globalShape != first.globalShape)
        return fail(
            id, describe(id) + " and " + describe(ids.front()) + " of '" +
                    name + "' are slices of " + dtypeName(weight.dtype) +
                    shapeString(weight.globalShape) + " and " +
                    dtypeName(first.dtype) + shapeString(first.globalShape) +
                    ": the slices of one tensor share its dtype and "
                    "shape");
      if (weight.state != first.state)
        return fail(id, describe(id) + " and " + describe(ids.front()) +
                            " of '" + name +
                            "' differ in kind (state or not): the slices of "
                            "one tensor are all state or none");
    }
    // No two slices overlap: a sweep along dimension 0.
    std::vector<size_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) {
      return plan.weights[a].sliceOffsets[0] < plan.weights[b].sliceOffsets[0];
    });
    for (size_t i = 0; i < sorted.size(); ++i) {
      const Weight &a = plan.weights[sorted[i]];
      for (size_t j = i + 1; j < sorted.size(); ++j) {
        const Weight &b = plan.weights[sorted[j]];
        if (b.sliceOffsets[0] >= a.sliceOffsets[0] + a.shape[0])
          break;
        bool overlap = true;
        for (size_t d = 0; d < a.shape.size() && overlap; ++d)
          overlap = std::max(a.sliceOffsets[d], b.sliceOffsets[d]) <
                    std::min(a.sliceOffsets[d] + a.shape[d],
                             b.sliceOffsets[d] + b.shape[d]);
        if (overlap) {
          size_t early = std::min(sorted[i], sorted[j]);
          size_t late = std::max(sorted[i], sorted[j]);
          return fail(late, describe(late) + " overlaps " + describe(early) +
                                " of '" + name + "'");
        }
      }
    }
    // Disjoint and inside: they tile the tensor when their sizes add up.
    uint64_t covered = 0;
    for (size_t id : ids) {
      const Weight &weight = plan.weights[id];
      uint64_t inside = 1;
      for (size_t d = 0; d < weight.shape.size(); ++d)
        inside *= uint64_t(
            std::clamp<int64_t>(weight.globalShape[d] - weight.sliceOffsets[d],
                                0, weight.shape[d]));
      covered += inside;
    }
    uint64_t total = uint64_t(numElements(first.globalShape));
    if (covered != total) {
      std::string list;
      for (size_t id : ids)
        list += (list.empty() ? "" : ", ") + std::to_string(id);
      return fail(ids.front(), "the slices of '" + name + "' (weights " + list +
                                   ") cover " + std::to_string(covered) +
                                   " of the " + std::to_string(total) +
                                   " elements of its " +
                                   shapeString(first.globalShape) +
                                   ": slices must tile their tensor exactly");
    }
  }

  for (size_t id = 0; id < plan.weights.size(); ++id) {
    const Weight &copy = plan.weights[id];
    if (copy.castOf < 0 || uint64_t(copy.castOf) >= plan.weights.size())
      continue;
    // Another block than the source's is fine (the runtime assembles it
    // from the source tensor's weights), of the same tensor.
    const Weight &source = plan.weights[copy.castOf];
    const std::vector<int64_t> &copyTensor =
        copy.isSlice() ? copy.globalShape : copy.shape;
    const std::vector<int64_t> &sourceTensor =
        source.isSlice() ? source.globalShape : source.shape;
    if (copyTensor != sourceTensor)
      return fail(id, describe(id) + " is a cast of " +
                          describe(size_t(copy.castOf)) +
                          ", but a copy must be a block of its source's "
                          "tensor");
  }
  return Status::ok();
}

void loomrt::copyBlockOverlap(const uint8_t *from,
                              const std::vector<int64_t> &fromOffsets,
                              const std::vector<int64_t> &fromShape,
                              uint8_t *to,
                              const std::vector<int64_t> &toOffsets,
                              const std::vector<int64_t> &toShape,
                              size_t size) {
  size_t rank = toShape.size();
  if (rank == 0) {
    std::memcpy(to, from, size);
    return;
  }
  std::vector<int64_t> low(rank), high(rank), fromStride(rank, 1),
      toStride(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t f = fromOffsets.empty() ? 0 : fromOffsets[d];
    int64_t t = toOffsets.empty() ? 0 : toOffsets[d];
    low[d] = std::max(f, t);
    high[d] = std::min(f + fromShape[d], t + toShape[d]);
    if (low[d] >= high[d])
      return;
  }
  for (size_t d = rank - 1; d > 0; --d) {
    fromStride[d - 1] = fromStride[d] * fromShape[d];
    toStride[d - 1] = toStride[d] * toShape[d];
  }
  size_t run = size_t(high[rank - 1] - low[rank - 1]) * size;
  std::vector<int64_t> at(low);
  while (true) {
    int64_t fromIndex = 0, toIndex = 0;
    for (size_t d = 0; d < rank; ++d) {
      fromIndex +=
          (at[d] - (fromOffsets.empty() ? 0 : fromOffsets[d])) * fromStride[d];
      toIndex += (at[d] - (toOffsets.empty() ? 0 : toOffsets[d])) * toStride[d];
    }
    std::memcpy(to + toIndex * size, from + fromIndex * size, run);
    // The next row: the odometer over every dimension but the last.
    int d = int(rank) - 2;
    for (; d >= 0; --d) {
      if (++at[size_t(d)] < high[size_t(d)])
        break;
      at[size_t(d)] = low[size_t(d)];
    }
    if (d < 0)
      return;
  }
}

bool loomrt::copiesSourceBlock(const Plan &plan, const Weight &copy) {
  if (copy.castOf < 0 || uint64_t(copy.castOf) >= plan.weights.size())
    return false;
  const Weight &source = plan.weights[size_t(copy.castOf)];
  return copy.shape == source.shape &&
         copy.sliceOffsets == source.sliceOffsets &&
         copy.globalShape == source.globalShape;
}

std::vector<uint8_t> loomrt::sourceBlockOf(const Plan &plan,
                                           const Weight &copy) {
  const Weight &source = plan.weights[size_t(copy.castOf)];
  size_t size = dtypeSize(source.dtype);
  uint64_t elements = 1;
  for (int64_t extent : copy.shape)
    elements *= uint64_t(extent);
  std::vector<uint8_t> block(elements * size, 0);
  for (const Weight &part : plan.weights)
    if (part.name == source.name && part.castOf < 0 &&
        part.dtype == source.dtype)
      copyBlockOverlap(plan.data.data() + part.offset, part.sliceOffsets,
                       part.shape, block.data(), copy.sliceOffsets, copy.shape,
                       size);
  return block;
}

namespace {

/// The weights `program` refers to, with the sources of the copies it
/// refers to.
std::vector<bool> referencedWeights(const Plan &plan,
                                    const RankProgram &program) {
  std::vector<bool> uses(plan.weights.size(), false);
  auto use = [&](const TensorRef &ref) {
    if (ref.space != TensorRef::Space::Weight ||
        ref.offset >= plan.weights.size())
      return;
    uses[ref.offset] = true;
    // (A copy of another block is derived from the plan's bytes and
    // rewritten by the step: its source need not be held.)
    if (copiesSourceBlock(plan, plan.weights[ref.offset]))
      uses[size_t(plan.weights[ref.offset].castOf)] = true;
  };
  for (const Instruction &instruction : program.instructions) {
    for (const TensorRef &ref : instruction.inputs)
      use(ref);
    for (const TensorRef &ref : instruction.outputs)
      use(ref);
  }
  for (const Binding &input : program.inputs)
    use(input.ref);
  for (const Binding &output : program.outputs)
    use(output.ref);
  return uses;
}

} // namespace

std::vector<std::vector<int>> loomrt::weightHolders(const Plan &plan) {
  std::vector<std::vector<int>> holders(plan.weights.size());
  for (const RankProgram &program : plan.ranks) {
    std::vector<bool> uses = referencedWeights(plan, program);
    for (size_t id = 0; id < plan.weights.size(); ++id)
      if (uses[id])
        holders[id].push_back(program.rank);
  }
  for (std::vector<int> &ranks : holders)
    std::sort(ranks.begin(), ranks.end());
  for (size_t id = 0; id < plan.weights.size(); ++id)
    if (plan.weights[id].state && holders[id].empty())
      holders[id].push_back(0);
  return holders;
}

std::vector<bool> loomrt::rankHeldWeights(const Plan &plan, int rank) {
  std::vector<bool> held(plan.weights.size(), false);
  if (rank < 0 || size_t(rank) >= plan.ranks.size())
    return held;
  held = referencedWeights(plan, plan.ranks[size_t(rank)]);
  if (rank != 0)
    return held;
  // Rank 0 also keeps the state no rank refers to.
  std::vector<bool> anyone = held;
  for (const RankProgram &program : plan.ranks) {
    if (&program == &plan.ranks[size_t(rank)])
      continue;
    std::vector<bool> uses = referencedWeights(plan, program);
    for (size_t id = 0; id < uses.size(); ++id)
      if (uses[id])
        anyone[id] = true;
  }
  for (size_t id = 0; id < plan.weights.size(); ++id)
    if (plan.weights[id].state && !anyone[id])
      held[id] = true;
  return held;
}

int64_t loomrt::intAttrOr(const Attributes &attrs, const std::string &name,
                          int64_t fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return fallback;
  if (const int64_t *value = std::get_if<int64_t>(&it->second))
    return *value;
  return fallback;
}
