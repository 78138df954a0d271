//===- Executor.h - Runs one rank of a plan ---------------------*- C++ -*-===//
//
// An Executor owns one rank's arena and runs its instruction stream on a
// backend: the CPU (the reference) or a CUDA GPU (ExecutorOptions). Everything
// that can be checked is checked when it is created (every kernel's operands
// and attributes), so `run` only fails on data-dependent errors such as an
// out-of-range gather index, or on communication.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_H
#define LOOM_RUNTIME_EXECUTOR_H

#include "loom/Runtime/Device.h"
#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

class Backend;
class Communicator;
class CommEvent;

/// Time spent in one kernel kind during a profiled run.
struct KernelProfile {
  std::string kernel;
  int64_t calls = 0;
  double seconds = 0;
};

/// Time spent in one instruction during a profiled run.
struct InstructionProfile {
  size_t index = 0;
  std::string kernel;
  std::string loc;
  double seconds = 0;
};

/// One instruction of a traced run (Executor::setTracing): a kernel from
/// its launch to its return (on the CPU, where it ran; on a device, its
/// launch), a collective from its posting to its completion (as the engine
/// recorded it, else when the executor's wait for it returned).
/// steady_clock nanoseconds since its epoch, which the processes of one
/// machine share.
struct TraceEvent {
  size_t index = 0;
  bool collective = false;
  int64_t startNs = 0;
  int64_t endNs = 0;
};

struct RunReport {
  /// The plan's arena size: the compiler's planned peak.
  uint64_t plannedArenaBytes = 0;
  /// Arena bytes the step actually touched: resident pages of the arena
  /// after the first run (mincore), in bytes. Equals the planned peak rounded
  /// up to whole pages when the plan is tight. 0 where the backend cannot
  /// tell (CUDA: the arena is one device allocation of the planned size).
  uint64_t measuredArenaBytes = 0;
  /// With CUDAOptions::graphs: "replayed" once a run was recorded
  /// as a CUDA graph, "off: <why>" when it could not be (runs then launch
  /// kernel by kernel); empty otherwise.
  std::string cudaGraphs;
  /// CUDA: the elementwise kernels the backend launches as groups, e.g. "98
  /// elementwise kernels in 5 launches" (CUDAOptions::groupElementwise);
  /// empty when none.
  std::string launchGroups;
  /// CUDA: where the matmuls' epilogues run, e.g. "108 in cuBLASLt (BGRADB
  /// 48, BIAS 36, DGELU 12, GELU_AUX_BIAS 12), 1 in the own kernel
  /// (batched 1)"; empty when no matmul has an epilogue.
  std::string matmulEpilogues;
  /// CUDA with CUDAOptions::tuneMatmuls, after a run: what tuning
  /// found, e.g. "147 matmuls, 23 problems timed with up to 8 cuBLASLt
  /// algorithms (9 moved off the heuristic's first); their time in a step
  /// 12.310 ms -> 11.520 ms (-6.4%)"; empty otherwise.
  std::string matmulTuning;
  /// The planned peak rounded up to whole pages, for comparison.
  uint64_t plannedArenaPageBytes = 0;
  /// Bytes of weights the rank reads.
  uint64_t weightBytes = 0;
  /// Bytes of the weights the rank holds (Executor::holds): those its
  /// program refers to, the sources of the copies it refers to, and on
  /// rank 0 the state no rank refers to. The planned peak is the arena plus
  /// these.
  uint64_t heldWeightBytes = 0;
  /// What the executor allocated for its weights: one block for the state
  /// weights and copies it holds (each rounded up to 256 bytes), and on a
  /// device the read-only ones too. The CPU reads its read-only weights in
  /// place, in the plan's data section (`inPlaceWeightBytes`).
  uint64_t weightAllocationBytes = 0;
  uint64_t inPlaceWeightBytes = 0;
  /// The rank's memory at its peak, measured after the first run: the
  /// arena it touched (measuredArenaBytes; the whole arena where the
  /// backend cannot tell), its weight allocation and the weights it reads
  /// in place. Memory the backend allocates for itself (CUDA workspaces,
  /// library handles) and the plan, which a process loads once for all its
  /// ranks, are not counted.
  uint64_t measuredPeakBytes = 0;
  /// Bytes the rank's collectives sent in the last run, by instruction name
  /// (all_reduce, all_gather, ...), counted as a ring sends them as they
  /// ran (loomcost::ringBytesSent, include/loom/Analysis/LinkModel.h: S is
  /// an all_gather's output, a reduce_scatter's input, the others' buffer;
  /// a recv sends nothing). Empty for a rank that does not communicate.
  std::map<std::string, uint64_t> commBytesSent;
  /// Wall time of the last run.
  double seconds = 0;
  /// By kernel kind, most expensive first (profiled runs only).
  std::vector<KernelProfile> kernels;
  /// Every instruction, in stream order (profiled runs only).
  std::vector<InstructionProfile> instructions;
  /// The last run's instructions, in posting order, when traced
  /// (Executor::setTracing); empty otherwise.
  std::vector<TraceEvent> trace;
};

class Executor {
public:
  /// Prepares `rank` of `plan` for execution on `options.device`; fails on
  /// an instruction the backend cannot run, naming its plan line. A rank
  /// with collective instructions needs `world`, a communicator over all the
  /// plan's ranks in which it is `rank` (on the CUDA backend, one whose
  /// buffers are device pointers: Communicator::onDevice); the communicators
  /// of the plan's groups are made here, so every rank must be created
  /// (concurrently) for any to succeed.
  static StatusOr<std::unique_ptr<Executor>>
  create(std::shared_ptr<const Plan> plan, int rank = 0,
         std::shared_ptr<Communicator> world = nullptr,
         const ExecutorOptions &options = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const RankProgram &program() const { return *program_; }

  /// Binds `tensor` to the input named `name`; its dtype and shape must be
  /// the plan's. The executor keeps a copy: the plan may reuse an input's
  /// arena slot once the input is dead, so every run copies it in afresh.
  Status setInput(const std::string &name, const HostTensor &tensor);
  /// Copies the inputs into the arena and runs the instruction stream; every
  /// input must have been set. `profile` times each instruction.
  Status run(bool profile = false);
  /// Output `index` (in plan order) after a run.
  HostTensor output(size_t index) const;

  /// Whether this rank holds weight `id` (weightHolders in Plan.h): an
  /// executor allocates and copies only the weights its program refers to
  /// (and the sources of the copies it refers to; rank 0 also the state no
  /// rank refers to), so that a tensor-parallel rank keeps its own slices
  /// and not the others'.
  bool holds(size_t id) const { return id < held_.size() && held_[id]; }

  /// The current value of weight `id`. State weights (trained parameters,
  /// optimizer state) live in the executor, start from the plan's data and
  /// change with every run; the others are the plan's. A weight the rank
  /// does not hold reads as the plan's initial value, which for state that
  /// another rank trains is not its current value: see `holds`.
  HostTensor weight(size_t id) const;
  /// Overwrites state weight `id` (resuming from a checkpoint); dtype and
  /// shape must be the plan's, and the rank must hold it. The weight's bf16
  /// copies (`cast_of`) that the rank holds follow.
  Status setWeight(size_t id, const HostTensor &tensor);

  const RunReport &report() const { return report_; }

  /// Records the next runs' instructions with their times into
  /// report().trace (`loom-run --trace`); off by default.
  void setTracing(bool on) { tracing_ = on; }

  /// Called before instruction `index` runs; an error ends the run there
  /// without telling the other ranks, as if the rank had died (tests use it
  /// to check that the others notice).
  void setInstructionHook(std::function<Status(size_t index)> hook) {
    hook_ = std::move(hook);
  }

  Device device() const { return device_; }

private:
  /// Writes weight `copy` (a `cast_of` copy) as the bf16 cast of `source`.
  Status refreshCopy(size_t copy, const HostTensor &source);
  Executor();
  const void *resolve(const TensorRef &ref) const;
  Status runInstructions(std::vector<double> &times, double &waitSeconds);
  Status runOrReplay(std::vector<double> &times, double &waitSeconds);
  /// Adds collective `instruction`, run on `comm`, to commBytesSent.
  void countSent(const Instruction &instruction, const Communicator &comm);
  /// Makes the other ranks stop with `status` (a local failure).
  Status fail(Status status);

  std::shared_ptr<const Plan> plan_;
  const RankProgram *program_ = nullptr;
  Device device_ = Device::CPU;
  std::unique_ptr<Backend> backend_;
  uint8_t *arena_ = nullptr;
  /// Where each weight lives in backend memory: state weights in one block
  /// of the executor's own (they change with every step), the others in the
  /// plan's data section (CPU) or a copy of it on the device.
  std::vector<uint8_t *> weights_;
  /// Which weights this rank holds (rankHeldWeights); null in weights_ for
  /// the others.
  std::vector<bool> held_;
  std::vector<HostTensor> inputs_;
  std::vector<bool> inputSet_;
  bool measured_ = false;
  /// CUDA graphs asked for and still possible; whether a run was recorded.
  bool graphs_ = false, captured_ = false;
  /// The next run tunes (CUDAOptions::tuneMatmuls), so it launches
  /// kernel by kernel: a capture cannot wait for the device.
  bool tuneFirst_ = false;
  bool tracing_ = false;
  RunReport report_;
  std::shared_ptr<Communicator> world_;
  /// The communicator of each plan group this rank belongs to (null for the
  /// others).
  std::vector<std::shared_ptr<Communicator>> groups_;
  std::function<Status(size_t)> hook_;
};

} // namespace loomrt

#endif // LOOM_RUNTIME_EXECUTOR_H
