//===- ElementwiseGroups.cpp - Which elementwise kernels launch as one ----===//
//
// Plans the elementwise groups of a rank's instruction stream (see
// Elementwise.h). Independence is decided on the plan's operands: two
// weights are the same memory only when they are the same weight, and arena
// operands overlap when their byte ranges do. A member may write what it
// reads itself (an in-place update), since its own elements are computed
// as in its own kernel.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.h"
#include "OperandSpans.h"

#include <algorithm>
#include <map>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

/// The run being built: what its instructions read and write.
struct Run {
  std::vector<size_t> members;
  std::vector<std::string> signatures;
  std::vector<Span> reads, writes;

  /// Whether `instruction` neither touches what the run writes nor writes
  /// what it reads.
  bool independentOf(const std::vector<Span> &itsReads,
                     const std::vector<Span> &itsWrites) const {
    return !anyOverlap(itsWrites, writes) && !anyOverlap(itsWrites, reads) &&
           !anyOverlap(itsReads, writes);
  }
};

/// The run's groups of two or more, as a batch (empty groups: none).
ElementwiseBatch batchOf(const Run &run) {
  std::map<std::string, size_t> groupOf;
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < run.members.size(); ++k) {
    auto [it, inserted] = groupOf.emplace(run.signatures[k], groups.size());
    if (inserted)
      groups.emplace_back();
    groups[it->second].push_back(run.members[k]);
  }
  ElementwiseBatch batch;
  size_t first = run.members.back();
  for (std::vector<size_t> &group : groups)
    if (group.size() >= 2) {
      first = std::min(first, group.front());
      batch.last = std::max(batch.last, group.back());
      batch.groups.push_back(std::move(group));
    }
  for (std::vector<size_t> &group : groups)
    if (group.size() == 1 && group[0] > first && group[0] < batch.last)
      batch.singles.push_back(group[0]);
  std::sort(batch.singles.begin(), batch.singles.end());
  return batch;
}

} // namespace

std::vector<ElementwiseBatch>
cuda::planElementwiseBatches(const std::vector<Instruction> &instructions) {
  std::vector<ElementwiseBatch> batches;
  Run run;
  auto close = [&] {
    if (run.members.size() >= 2) {
      ElementwiseBatch batch = batchOf(run);
      if (!batch.groups.empty())
        batches.push_back(std::move(batch));
    }
    run = Run();
  };
  for (size_t index = 0; index < instructions.size(); ++index) {
    const Instruction &instruction = instructions[index];
    std::string signature = elementwiseGroupSignature(instruction);
    if (signature.empty()) {
      close();
      continue;
    }
    std::vector<Span> reads, writes;
    for (const TensorRef &ref : instruction.inputs)
      reads.push_back(spanByWeightId(ref));
    for (const TensorRef &ref : instruction.outputs)
      writes.push_back(spanByWeightId(ref));
    if (!run.independentOf(reads, writes) ||
        run.members.size() == kElementwiseBatchMaxRun)
      close();
    run.members.push_back(index);
    run.signatures.push_back(std::move(signature));
    run.reads.insert(run.reads.end(), reads.begin(), reads.end());
    run.writes.insert(run.writes.end(), writes.begin(), writes.end());
  }
  close();
  return batches;
}
