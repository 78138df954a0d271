//===- Checkpoint.h - Training state on disk --------------------*- C++ -*-===//
//
// A checkpoint is a folder: one file per rank, DIR/rank<R>.ckpt, holding
// the state weights (trained parameters, their bf16 copies, optimizer state)
// that rank's program uses, as its own executor has them, and DIR/index, a
// text table of contents: the step count, the rank count, each rank's file
// and, per state weight, its dtype, shape, slice (for a slice of a sharded
// tensor: its offsets and the tensor's shape) and the ranks whose files
// hold it. Slices stay where they are: a rank's file holds its own. The
// index is written last, so a checkpoint exists once its index does. The
// formats are documented in docs/design/training.md.
//
// Plain C++17 on the runtime: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_CHECKPOINT_H
#define LOOM_RUNTIME_SESSION_CHECKPOINT_H

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

class Executor;

/// The first line of DIR/index: the checkpoint format's version. Version 3
/// added slices; version 2 (whole tensors) still loads, and so does
/// version 1, a single file DIR/state.ckpt (as one rank's).
constexpr const char *kCheckpointIndexMagic = "loom-checkpoint 3";
/// The first line of a rank's file; version 2 added slices, and files of
/// version 1 still load.
constexpr const char *kRankCheckpointMagic = "loom-checkpoint-rank 2";

/// The ids of `plan`'s state weights, in increasing order.
std::vector<size_t> stateWeights(const Plan &plan);

/// The state weights a checkpoint holds: all but the bf16 copies
/// (`cast_of`), which are derived from their sources on loading, so that a
/// checkpoint resumes under a layout that keeps other copies (or none).
std::vector<size_t> checkpointedWeights(const Plan &plan);

/// For every weight id, the ranks whose checkpoint files hold it, in
/// increasing order: for a state weight, the ranks whose executors hold it
/// (weightHolders: the ranks whose program refers to it or to a `cast_of`
/// copy of it; rank 0 when no rank refers to it). Empty for the other
/// weights.
std::vector<std::vector<int>> stateWeightHolders(const Plan &plan);

/// The state weights rank `rank` holds (see stateWeightHolders), in
/// increasing id order.
std::vector<size_t> rankStateWeights(const Plan &plan, int rank);

/// DIR/index in memory.
struct CheckpointIndex {
  struct Entry {
    std::string name;
    DType dtype = DType::F32;
    /// The weight's shape: the slice's, for a slice.
    std::vector<int64_t> shape;
    /// The ranks whose files hold it, in increasing order.
    std::vector<int> ranks;
    /// For a slice (Weight::sliceOffsets, Weight::globalShape), where it
    /// starts in its tensor and the tensor's shape; empty for a whole one.
    std::vector<int64_t> sliceOffsets;
    std::vector<int64_t> globalShape;
  };
  /// Steps done when it was written.
  int64_t step = 0;
  /// Each rank's file, a name in DIR; the size is the rank count.
  std::vector<std::string> rankFiles;
  /// One entry per state weight, in the plan's weight order (the slices
  /// of a tensor are entries of their own that share its name).
  std::vector<Entry> weights;
};

/// "rank<R>.ckpt".
std::string rankCheckpointFile(int rank);

/// The index of a checkpoint of `plan`'s state after `step` steps.
CheckpointIndex makeCheckpointIndex(const Plan &plan, int64_t step);

/// DIR/index's text.
std::string formatCheckpointIndex(const CheckpointIndex &index);

/// Parses DIR/index's text; errors name `source`.
StatusOr<CheckpointIndex> parseCheckpointIndex(std::string_view text,
                                               const std::string &source);

/// Reads DIR/index. A folder with only DIR/state.ckpt (a checkpoint of
/// format version 1) reads as a one-rank checkpoint whose rank file is
/// that.
StatusOr<CheckpointIndex> readCheckpointIndex(const std::string &dir);

/// Checks that the checkpoint in `dir` with `index` holds exactly `plan`'s
/// state: every state tensor's name, dtype and (global) shape ("written for
/// another model or optimizer"), and that its parts cover each tensor
/// exactly once. It may have been written with another layout (rank count,
/// slices, placement): loading then reshards (checkpointNeedsResharding).
Status checkCheckpointMatches(const CheckpointIndex &index, const Plan &plan,
                              const std::string &dir);

/// Whether the checkpoint was written with another layout than `plan`'s:
/// another rank count, or state cut into other slices or placed on other
/// ranks. loadRankCheckpoint then assembles each rank's weights from the
/// parts that overlap them, from whichever files hold those.
bool checkpointNeedsResharding(const CheckpointIndex &index, const Plan &plan);

/// Writes rank `rank`'s file of a checkpoint after `step` steps to `path`
/// (the caller renames it into place): the state weights the rank holds,
/// with `executor`'s values.
Status writeRankCheckpoint(const std::string &path, const Plan &plan,
                           const Executor &executor, int rank, int64_t step);

/// Loads rank `rank`'s state from the checkpoint in `dir` (checked against
/// `plan` with checkCheckpointMatches) into `executor`: rank `rank`'s file
/// when the layout is the same, else the parts of the files that overlap
/// the rank's weights (resharding). Checks everything before setting any
/// weight: each file read is a rank file of its rank, at the index's step,
/// holding the weights the index gives it.
Status loadRankCheckpoint(const std::string &dir, const CheckpointIndex &index,
                          const Plan &plan, int rank, Executor &executor);

/// The file name --output-dir and --save-weights give a tensor named
/// `name`: `name` with bytes other than letters, digits, '.', '_' and '-'
/// written %XX (an ONNX name may hold '/'), then ".npy". Distinct names
/// give distinct files (on a case-sensitive file system). ASCII only,
/// whatever the locale.
std::string npyFileName(const std::string &name);

} // namespace loomrt

#endif // LOOM_RUNTIME_SESSION_CHECKPOINT_H
