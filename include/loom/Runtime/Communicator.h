//===- Communicator.h - Ranks and their collectives -------------*- C++ -*-===//
//
// Every parallel plan runs as N ranks exchanging tensors through a
// Communicator: collectives over a group of ranks (a mesh axis: the tensor-
// parallel group, the data-parallel group) and point-to-point transfers
// (pipeline neighbours). Operations return a CommEvent that the executor
// waits on, so that a transfer can overlap the kernels that do not need it.
//
// Engines implement the interface: threads (N ranks in one process), MPI
// and NCCL (see docs/design/communication.md). Every wait has a timeout, and
// a rank that fails aborts the others with its message: a parallel run ends
// with an error naming the rank and the operation, never a hang.
//
// Plain C++17: the runtime builds without LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMUNICATOR_H
#define LOOM_RUNTIME_COMMUNICATOR_H

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace loomrt {

enum class ReduceOp : uint8_t { Sum, Max, Avg };
const char *reduceOpName(ReduceOp op);

/// Completion of an operation. `wait` returns its Status: an error when a
/// peer failed, the operation did not match the peers' or it timed out.
class CommEvent {
public:
  virtual ~CommEvent();
  virtual Status wait() = 0;
  /// Engines on device memory: makes the work enqueued later on `stream` (a
  /// cudaStream_t of the communicator's device) wait for the operation
  /// without blocking the host. False when the engine cannot; the caller
  /// then waits. Either way `wait` must still be called to learn the
  /// status (it then returns at once or after the operation's remaining
  /// time).
  virtual bool waitOnStream(void *stream);
  /// When the operation completed (steady_clock nanoseconds since its
  /// epoch), for traces; -1 when not yet or when the engine cannot tell
  /// (the waiter then knows only when its wait returned).
  virtual int64_t completedAtNs() const;
  /// Moves the operation on without blocking, for engines that progress
  /// only inside their own calls (MPI: a large send whose receiver pulls
  /// it piece by piece moves only while the sender is in MPI). True when
  /// it needs no more of this: it completed (`wait` still gives its
  /// status), or the engine moves it by itself (the default).
  virtual bool poll();
};

/// An event that is complete when created (engines that finish an
/// operation inside the call).
std::shared_ptr<CommEvent> completedEvent(Status status);

struct CommOptions {
  /// How long any wait may take before it fails (--comm-timeout).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Compare every collective's arguments across the ranks first (a debug
  /// mode for engines where that costs a round trip; the threads engine
  /// always checks).
  bool checkCollectives = false;
};

/// One rank's view of a group of ranks. Collectives must be called by every
/// rank of the group in the same order with matching arguments (counts are
/// elements of `dtype`).
class Communicator {
public:
  virtual ~Communicator();

  /// This rank's index in the group and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The world ranks of the group's members, in group-rank order.
  virtual const std::vector<int> &members() const = 0;

  /// The communicator of the sub-group `worldRanks` (sorted, unique, holding
  /// this rank), e.g. the tensor-parallel group of a mesh axis. Every member
  /// must ask for it; asking twice returns the same group.
  virtual StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) = 0;

  /// `recv` = op over all ranks of `send` (`count` elements each). In place
  /// when send == recv.
  virtual std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                               int64_t count, DType dtype,
                                               ReduceOp op) = 0;
  /// `recv` = the ranks' `send` blocks (`count` elements each) in rank
  /// order.
  virtual std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                               int64_t count, DType dtype) = 0;
  /// `recv` (`count` elements) = op over all ranks of block `rank` of their
  /// `send` (size() * count elements).
  virtual std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                                   int64_t count, DType dtype,
                                                   ReduceOp op) = 0;
  /// Every rank's `buffer` = the root's.
  virtual std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count,
                                               DType dtype, int root) = 0;
  /// Block j of rank i's `recv` = block i of rank j's `send` (`count`
  /// elements per block).
  virtual std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                              int64_t count, DType dtype) = 0;
  /// Transfers `bytes` to / from group rank `peer`; sends and receives with
  /// the same (peer, tag) pair up in order.
  virtual std::shared_ptr<CommEvent> send(const void *buffer, uint64_t bytes,
                                          int peer, int tag) = 0;
  virtual std::shared_ptr<CommEvent> recv(void *buffer, uint64_t bytes,
                                          int peer, int tag) = 0;

  /// Whether buffers are device pointers (the NCCL engine, and host engines
  /// wrapped by wrapForDevice); host memory otherwise.
  virtual bool onDevice() const;
  /// Device engines: operations posted from now on start only after the
  /// work enqueued so far on `stream` (a cudaStream_t), so the kernels that
  /// write a send buffer need not be waited for on the host. Host engines
  /// ignore it.
  virtual void orderAfter(void *stream);

  /// Makes every other rank's pending and future operations fail with
  /// "rank R failed: message" (called when this rank cannot go on).
  virtual void abort(const std::string &message) = 0;
};

/// N ranks in one process (`loom-run --ranks N`): rank i of the result is
/// used by thread i. Collectives run in the calling threads, synchronized by
/// a barrier per operation; transfers copy directly between the ranks'
/// buffers.
std::vector<std::shared_ptr<Communicator>>
createThreadCommunicators(int size, const CommOptions &options = {});

/// `inner` (an engine whose collectives complete inside the call, as the
/// threads engine's) with a progress thread of its own per communicator:
/// collectives are queued and return at once, run in posting order, and
/// their events record when they completed (completedAtNs), so that the
/// executor's compute overlaps them. Sub-groups are wrapped alike;
/// transfers go straight through. `loom-run --ranks N` uses it.
std::shared_ptr<Communicator> wrapAsync(std::shared_ptr<Communicator> inner);

/// Whether this runtime was built with MPI.
bool haveMPI();
/// This process's rank of an `mpirun` job (MPI_COMM_WORLD), initializing MPI
/// on first use; an error when the runtime was built without MPI.
StatusOr<std::shared_ptr<Communicator>>
createMPICommunicator(const CommOptions &options = {});

/// `host` (an engine on host memory: threads or MPI) made to move device
/// buffers on CUDA device `gpu` (-1: the calling thread's current device):
/// each operation stages its bytes
/// through host memory on a stream of its own. That is how N thread ranks
/// share one GPU (NCCL refuses two ranks on one GPU), and how ranks on GPUs
/// communicate without NCCL; it is a correctness path, not a fast one. An
/// error without the CUDA backend.
StatusOr<std::shared_ptr<Communicator>>
wrapForDevice(std::shared_ptr<Communicator> host, int gpu = -1);

/// Whether this runtime was built with NCCL (the CUDA toolkit's).
bool haveNCCL();
/// This process's rank of a job with one rank per GPU (`mpirun -np N`):
/// rank and size come from MPI_COMM_WORLD through the MPI engine, which
/// also bootstraps NCCL; without MPI the world is this one rank. The rank
/// drives GPU (local rank % visible GPUs), made the calling thread's current
/// device; two ranks on one GPU are an error, as NCCL refuses them.
/// Buffers are device pointers on that GPU. Operations run in posting order
/// on the communicator's own non-blocking CUDA stream, which waits for no
/// other stream: whatever writes a send buffer must have completed when the
/// operation is posted, and a received buffer is ready once wait() succeeds.
/// Sends and receives are launched together (one NCCL group) at the first
/// wait on one of them or at the next collective. NCCL has no tags: the
/// transfers between two ranks pair up in posting order and a tag only
/// labels errors. A timeout or an NCCL error aborts the NCCL communicator.
StatusOr<std::shared_ptr<Communicator>>
createNCCLCommunicator(const CommOptions &options = {});

} // namespace loomrt

#endif // LOOM_RUNTIME_COMMUNICATOR_H
