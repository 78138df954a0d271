//===- Backend.h - What the executor needs of a device (internal) -*- C++
//-*-===//
//
// The executor walks a rank's instruction stream, resolves operands to
// memory and orders communication; a Backend owns the memory the kernels
// address and runs the kernels. The CPU backend runs each kernel inside
// `launch`; the CUDA backend enqueues it on its compute stream and only
// `synchronize` waits.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_BACKEND_H
#define LOOM_LIB_RUNTIME_BACKEND_H

#include "loom/Runtime/Device.h"
#include "loom/Runtime/Plan.h"

#include <memory>
#include <vector>

namespace loomrt {

class CommEvent;
class Communicator;

class Backend {
public:
  virtual ~Backend();

  /// "CPU" or "CUDA", for messages.
  virtual const char *name() const = 0;

  /// Called once with the rank's whole program before `prepare`, for work a
  /// backend does for all instructions at once (the CUDA backend compiles
  /// the elementwise programs in parallel). Errors surface in `prepare`.
  virtual void preparePlan(const std::vector<Instruction> & /*instructions*/) {}

  /// Validates kernel instruction `index` and prepares it for `launch`.
  /// Called once per kernel instruction, in stream order.
  virtual Status prepare(size_t index, const Instruction &instruction) = 0;

  /// The arena: `bytes` of memory the kernels address, owned by the
  /// backend.
  virtual StatusOr<uint8_t *> allocateArena(uint64_t bytes) = 0;
  /// Other memory the kernels address (weights), owned by the backend.
  virtual StatusOr<uint8_t *> allocate(uint64_t bytes) = 0;
  /// Whether kernels can address host memory (the plan's data section)
  /// directly, so read-only weights need no copy.
  virtual bool addressesHostMemory() const = 0;

  /// Copies host bytes into backend memory, ordered before later launches.
  virtual Status upload(void *destination, const void *source,
                        uint64_t bytes) = 0;
  /// Copies backend bytes to the host once every earlier launch is done.
  virtual Status download(void *destination, const void *source,
                          uint64_t bytes) = 0;

  /// Copies `bytes` between two places of backend memory, ordered after the
  /// launches so far and before later ones.
  virtual Status copy(void *destination, const void *source,
                      uint64_t bytes) = 0;

  /// Runs (CPU) or enqueues (CUDA) prepared kernel instruction `index`.
  /// `inputs`/`outputs` are backend pointers. A non-OK status is an error
  /// the kernel found (CPU) or a launch error (CUDA).
  virtual Status launch(size_t index, const Instruction &instruction,
                        const void *const *inputs, void *const *outputs) = 0;
  /// Waits for everything launched; reports errors kernels found in their
  /// data. `failed` is then the instruction that found it (unchanged when
  /// the error is not an instruction's).
  virtual Status synchronize(size_t &failed) = 0;

  /// Communication. Operations posted on `comm` from now on must see what
  /// the launches so far wrote (CUDA: the communicator's stream waits for
  /// the compute stream; CPU: nothing to do).
  virtual void orderCommunication(Communicator &comm) = 0;
  /// Makes later launches wait for `event` without blocking the host where
  /// the engine allows it; false when the host must wait instead.
  virtual bool waitOnDevice(CommEvent &event) = 0;

  /// Profiling: when on, `launch` times each instruction and
  /// `instructionSeconds` gives the times after `synchronize`.
  virtual void startProfile(size_t instructions) = 0;
  virtual std::vector<double> instructionSeconds() = 0;

  /// Bytes of the arena the step actually touched, 0 when the backend
  /// cannot tell (measured once, after the first run).
  virtual uint64_t measureArena() = 0;

  /// What the backend launches together, for RunReport::launchGroups
  /// ("" when nothing).
  virtual std::string groupSummary() const { return ""; }
  /// Where the matmuls' epilogues run, for RunReport::matmulEpilogues (""
  /// when the backend has no choice to report).
  virtual std::string epilogueSummary() const { return ""; }
  /// What tuning found so far, for RunReport::matmulTuning ("" when the
  /// backend does not tune).
  virtual std::string tuningSummary() const { return ""; }
  /// Keeps what tuning found where the options asked (after a run); a
  /// failure shows in tuningSummary, it does not fail the run.
  virtual void saveTuning() {}

  /// Replay (CUDA graphs): the launches between beginCapture and
  /// endCapture are recorded instead of run, and `replay` enqueues all of
  /// them again with one call. Backends without it say so in
  /// `beginCapture`'s error.
  virtual Status beginCapture() {
    return Status::error(std::string("the ") + name() +
                         " backend cannot record launches");
  }
  /// Ends the recording; `keep` false (a launch failed) drops it. An error
  /// says why nothing was recorded.
  virtual Status endCapture(bool /*keep*/) { return Status::ok(); }
  /// Enqueues the recorded launches (after endCapture kept them).
  virtual Status replay() {
    return Status::error("nothing was recorded to replay");
  }
};

std::unique_ptr<Backend> createCPUBackend();
/// The CUDA backend on options.cuda.gpu; an error without the CUDA backend or a
/// GPU.
StatusOr<std::unique_ptr<Backend>>
createCUDABackend(const ExecutorOptions &options);

} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_BACKEND_H
