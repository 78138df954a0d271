//===- ArenaTensors.cpp - The tensors of a rank's arena, over time --------===//

#include "loom/Runtime/ArenaTensors.h"

#include <algorithm>
#include <iterator>
#include <map>

using namespace loomrt;

std::vector<ArenaTensor> loomrt::arenaTensors(const RankProgram &program) {
  std::vector<ArenaTensor> tensors;
  // The tensor that last wrote each byte range: by its first byte.
  std::map<uint64_t, size_t> occupant;
  auto write = [&](const TensorRef &ref, size_t at, int64_t writer) {
    if (ref.space != TensorRef::Space::Arena || ref.bytes() == 0)
      return;
    // Whatever it overwrites is dead from here on.
    auto it = occupant.lower_bound(ref.offset);
    if (it != occupant.begin())
      --it;
    bool inPlace = false;
    while (it != occupant.end() && it->first < ref.offset + ref.bytes()) {
      const ArenaTensor &old = tensors[it->second];
      if (old.ref.offset + old.ref.bytes() > ref.offset) {
        inPlace |= writer >= 0 && old.last == at &&
                   old.ref.offset == ref.offset &&
                   old.ref.bytes() == ref.bytes();
        it = occupant.erase(it);
      } else {
        ++it;
      }
    }
    occupant[ref.offset] = tensors.size();
    tensors.push_back({ref, at, at, writer, inPlace});
  };
  auto read = [&](const TensorRef &ref, size_t at) {
    if (ref.space != TensorRef::Space::Arena)
      return;
    auto it = occupant.upper_bound(ref.offset);
    if (it == occupant.begin())
      return;
    ArenaTensor &tensor = tensors[std::prev(it)->second];
    if (tensor.ref.offset + tensor.ref.bytes() > ref.offset)
      tensor.last = std::max(tensor.last, at);
  };
  for (const Binding &input : program.inputs)
    write(input.ref, 0, -1);
  const std::vector<Instruction> &code = program.instructions;
  for (size_t i = 0; i < code.size(); ++i) {
    for (const TensorRef &ref : code[i].inputs)
      read(ref, i);
    for (const TensorRef &ref : code[i].outputs)
      write(ref, i, int64_t(i));
  }
  for (const Binding &output : program.outputs)
    read(output.ref, code.empty() ? 0 : code.size() - 1);
  return tensors;
}
