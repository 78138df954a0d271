//===- CollectiveInstructions.h - A plan's communication steps --*- C++ -*-===//
//
// The `collective` instructions of a plan (all_reduce, all_gather,
// reduce_scatter, broadcast, all_to_all, send, recv) are not kernels: they
// run on a Communicator. Like kernels they have a `check`, run once when a
// rank is prepared so that a bad plan is an error before anything runs, and
// a `start`, which posts the operation and returns its completion event.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_COLLECTIVEINSTRUCTIONS_H
#define LOOM_LIB_RUNTIME_COLLECTIVEINSTRUCTIONS_H

#include "loom/Runtime/Communicator.h"
#include "loom/Runtime/Plan.h"

#include <memory>

namespace loomrt {

/// Validates collective `instruction` of world rank `rank` of `plan`:
/// its name, operands, attributes, group (which must hold `rank`) or peer.
Status checkCollective(const Plan &plan, int rank,
                       const Instruction &instruction);

/// The communicator a checked collective runs on: index into the plan's
/// groups, or -1 for send/recv, which address world ranks.
int collectiveGroup(const Instruction &instruction);

/// Whether `instruction` is a broadcast whose root (this rank of `comm`)
/// must first copy its input into its output: the engines broadcast in
/// place, from the output buffer. The copy is the backend's (device memory
/// on the CUDA backend), ordered before the collective is posted.
bool needsRootCopy(const Instruction &instruction, const Communicator &comm,
                   const void *const *inputs, void *const *outputs);

/// Posts checked collective `instruction` on `comm` (its group's
/// communicator, or the world for send/recv) with resolved operands (after
/// the root copy of needsRootCopy).
std::shared_ptr<CommEvent> startCollective(const Instruction &instruction,
                                           Communicator &comm,
                                           const void *const *inputs,
                                           void *const *outputs);

} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_COLLECTIVEINSTRUCTIONS_H
