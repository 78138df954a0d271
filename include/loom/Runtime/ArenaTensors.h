//===- ArenaTensors.h - The tensors of a rank's arena, over time -*- C++
//-*-===//
//
// What a rank's arena holds while its program runs, from the plan alone:
// the simulated trace's memory counter (PlanSimulation.h's liveArenaBytes)
// and `loom-plan --memory` (Session/Report.h's arenaPeak) read it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ARENATENSORS_H
#define LOOM_RUNTIME_ARENATENSORS_H

#include "loom/Runtime/Plan.h"

#include <vector>

namespace loomrt {

/// A tensor in a rank's arena: from the instruction that writes it (a step
/// input: from the start, `writer` -1) to the last that reads it (a step
/// output: the last instruction), the arena's bytes reused as the memory
/// planner reused them (a write ends whatever it overwrites).
struct ArenaTensor {
  TensorRef ref;
  size_t first = 0, last = 0;
  int64_t writer = -1;
  /// Written in place of the tensor its writer reads last (an elementwise
  /// kernel's output over its input): the two are one set of bytes at
  /// `first`, counted as the old one's there.
  bool inPlace = false;
  /// The first instruction at which this tensor's bytes count as its own.
  size_t countedFrom() const { return first + (inPlace ? 1 : 0); }
};
std::vector<ArenaTensor> arenaTensors(const RankProgram &program);

} // namespace loomrt

#endif // LOOM_RUNTIME_ARENATENSORS_H
