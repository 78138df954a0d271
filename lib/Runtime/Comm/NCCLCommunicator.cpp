//===- NCCLCommunicator.cpp - One rank per GPU, over NCCL -----------------===//
//
// `mpirun -np N loom-run ...` on GPUs: every process is one rank driving one
// GPU (its local rank modulo the GPUs it sees) and collectives run in NCCL on
// device buffers. MPI only bootstraps, through the MPI engine, whose waits
// already time out: rank 0 of a group makes NCCL's unique id and broadcasts
// it, so making a group involves its members only, as the interface asks.
// Without MPI the world is this one rank.
//
// Nothing may hang. Communicators are NCCL's nonblocking kind: creating one
// and enqueuing an operation return at once (ncclInProgress) and are polled
// against the timeout, and an event polls a CUDA event recorded after its
// operation together with NCCL's asynchronous error. A timeout or an error
// aborts the NCCL communicator (ncclCommAbort stops its kernels) and fails
// its later operations.
//
// Operations run in posting order on one non-blocking stream per
// communicator. An NCCL send or receive holds the GPU until its counterpart
// runs on the peer, so sends and receives are held back and launched
// together as one NCCL group at the first wait on one of them or at the next
// collective: posting a send and a receive and then waiting on both works as
// it does with MPI. NCCL has no tags: transfers between two ranks pair up in
// posting order, and a tag only labels error messages.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <unistd.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL engine needs NCCL 2.14 or later (nonblocking communicators)"
#endif

using namespace loomrt;

namespace {

using Clock = std::chrono::steady_clock;

/// The NCCL type of a reduction's elements; i1 has none. (Operations that
/// only move data move bytes.)
bool reductionType(DType dtype, ncclDataType_t &type) {
  static const std::map<DType, ncclDataType_t> types = {
      {DType::F16, ncclFloat16}, {DType::BF16, ncclBfloat16},
      {DType::F32, ncclFloat32}, {DType::F64, ncclFloat64},
      {DType::I32, ncclInt32},   {DType::I64, ncclInt64}};
  auto found = types.find(dtype);
  if (found == types.end())
    return false;
  type = found->second;
  return true;
}

ncclRedOp_t reductionOp(ReduceOp op) {
  return op == ReduceOp::Max   ? ncclMax
         : op == ReduceOp::Avg ? ncclAvg
                               : ncclSum;
}

std::string ncclMessage(ncclResult_t result) {
  std::string message = ncclGetErrorString(result);
  const char *last = ncclGetLastError(nullptr);
  if (last && *last)
    message += std::string(" (") + last + ")";
  return message;
}

/// Waits out the host side of a nonblocking NCCL call (creation, enqueue,
/// finalization). A failure's message is the end of a sentence: " timed out
/// after T ms" or " failed in NCCL: ...".
Status settle(ncclComm_t comm, ncclResult_t result, Clock::time_point deadline,
              std::chrono::milliseconds timeout) {
  while (result == ncclInProgress) {
    if (Clock::now() > deadline)
      return Status::error(" timed out after " +
                           std::to_string(timeout.count()) + " ms");
    std::this_thread::yield();
    ncclResult_t state = ncclSuccess;
    ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    result = queried == ncclSuccess ? state : queried;
  }
  if (result != ncclSuccess)
    return Status::error(" failed in NCCL: " + ncclMessage(result));
  return Status::ok();
}

std::string groupName(const std::vector<int> &members) {
  std::string name = "[";
  for (size_t i = 0; i < members.size(); ++i)
    name += (i ? "," : "") + std::to_string(members[i]);
  return name + "]";
}

/// Whether [a, a + aBytes) and [b, b + bBytes) share a byte.
bool overlap(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

class NCCLCommunicator;

/// What the communicators of a process share: the MPI engine that
/// bootstraps them (null without MPI), the GPU, the groups made so far.
struct World {
  std::shared_ptr<Communicator> mpi;
  int rank = 0, size = 1, device = 0;
  CommOptions options;
  NCCLCommunicator *communicator = nullptr; // the world's own
  std::map<std::vector<int>, std::shared_ptr<NCCLCommunicator>> groups;
};

/// An operation's place on the stream: a CUDA event recorded after it once
/// launched (sends and receives wait to be launched together).
struct Launch {
  cudaEvent_t done = nullptr;
  bool launched = false;
  Status status; // why it could not be launched
  Clock::time_point deadline;
  ~Launch() {
    if (done)
      cudaEventDestroy(done);
  }
};

/// A send or receive of bytes.
struct Transfer {
  bool isSend;
  void *buffer;
  size_t bytes;
  int peer;
};

/// Enqueues transfers as one NCCL group, which runs them concurrently.
ncclResult_t enqueueGroup(const std::vector<Transfer> &transfers,
                          ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t first = ncclGroupStart();
  for (const Transfer &t : transfers) {
    ncclResult_t result =
        t.isSend ? ncclSend(t.buffer, t.bytes, ncclUint8, t.peer, comm, stream)
                 : ncclRecv(t.buffer, t.bytes, ncclUint8, t.peer, comm, stream);
    if (first == ncclSuccess)
      first = result;
  }
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

class NCCLCommunicator : public Communicator,
                         public std::enable_shared_from_this<NCCLCommunicator> {
public:
  /// Makes the NCCL communicator of `members` (world ranks), `mpi` being
  /// their MPI group; collective over the members.
  static StatusOr<std::shared_ptr<NCCLCommunicator>>
  create(const std::shared_ptr<World> &world, std::shared_ptr<Communicator> mpi,
         std::vector<int> members) {
    auto created = std::make_shared<NCCLCommunicator>();
    NCCLCommunicator &c = *created;
    c.world = world;
    c.mpi = std::move(mpi);
    c.memberRanks = std::move(members);
    c.options = world->options;
    c.worldRank = world->rank;
    c.device = world->device;
    c.myRank = c.mpi ? c.mpi->rank() : 0;
    c.mySize = int(c.memberRanks.size());
    std::string what = "rank " + std::to_string(c.worldRank) +
                       ": NCCL initialization of group " +
                       groupName(c.memberRanks);
    // Rank 0 makes the id; a flag tells the others whether it could.
    struct {
      char ok;
      ncclUniqueId id;
    } message{};
    if (c.myRank == 0)
      message.ok = ncclGetUniqueId(&message.id) == ncclSuccess;
    if (c.mpi)
      if (Status status =
              c.mpi->broadcast(&message, sizeof message, DType::I1, 0)->wait();
          !status)
        return status;
    if (!message.ok)
      return Status::error(what + " failed: rank " +
                           std::to_string(c.memberRanks[0]) +
                           " could not make an NCCL id");
    if (cudaSetDevice(c.device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking) !=
            cudaSuccess)
      return Status::error(
          what + " failed in CUDA: " + cudaGetErrorString(cudaGetLastError()));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    // Two statements: settle must see the communicator the call made, and
    // the order in which arguments are evaluated is unspecified.
    ncclResult_t started =
        ncclCommInitRankConfig(&comm, c.mySize, message.id, c.myRank, &config);
    Status status = settle(comm, started, Clock::now() + c.options.timeout,
                           c.options.timeout);
    if (!status) {
      if (comm)
        ncclCommAbort(comm);
      return Status::error(what + status.message());
    }
    c.comm = comm;
    return created;
  }

  ~NCCLCommunicator() override {
    // The world communicator ends its groups with itself (see close).
    std::vector<NCCLCommunicator *> all = {this};
    if (ownedWorld)
      for (auto &entry : ownedWorld->groups)
        all.push_back(entry.second.get());
    close(all, options.timeout);
    if (ordering)
      cudaEventDestroy(ordering);
    if (stream)
      cudaStreamDestroy(stream);
  }

  /// Finalizes NCCL communicators (their operations finish), then frees
  /// them; aborts those that take too long. Finalizing may wait for the
  /// peers to finalize too, which may end their groups in another order, so
  /// all are finalized at once and polled together.
  static void close(const std::vector<NCCLCommunicator *> &all,
                    std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    std::vector<ncclResult_t> states;
    for (NCCLCommunicator *c : all)
      states.push_back(c->comm ? ncclCommFinalize(c->comm) : ncclSuccess);
    for (bool busy = true; busy && Clock::now() < deadline;) {
      busy = false;
      for (size_t i = 0; i < all.size(); ++i)
        if (states[i] == ncclInProgress) {
          ncclCommGetAsyncError(all[i]->comm, &states[i]);
          busy = busy || states[i] == ncclInProgress;
        }
      std::this_thread::yield();
    }
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i]->comm) {
        if (states[i] == ncclSuccess)
          ncclCommDestroy(all[i]->comm);
        else
          ncclCommAbort(all[i]->comm);
        all[i]->comm = nullptr;
        all[i]->abortedBecause = "it was closed";
      }
  }

  bool onDevice() const override { return true; }

  void orderAfter(void *other) override {
    cudaSetDevice(device);
    if (!ordering)
      cudaEventCreateWithFlags(&ordering, cudaEventDisableTiming);
    cudaEventRecord(ordering, static_cast<cudaStream_t>(other));
    cudaStreamWaitEvent(stream, ordering, 0);
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  const std::vector<int> &members() const override { return memberRanks; }

  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) override {
    std::shared_ptr<World> w = world.lock();
    if (!w)
      return Status::error("rank " + std::to_string(worldRank) +
                           ": the world communicator was released");
    if (worldRanks.empty() ||
        !std::is_sorted(worldRanks.begin(), worldRanks.end()) ||
        std::adjacent_find(worldRanks.begin(), worldRanks.end()) !=
            worldRanks.end() ||
        worldRanks.front() < 0 || worldRanks.back() >= w->size)
      return Status::error("a group needs sorted, distinct ranks in [0, " +
                           std::to_string(w->size) + ")");
    if (!std::binary_search(worldRanks.begin(), worldRanks.end(), worldRank))
      return Status::error("rank " + std::to_string(worldRank) +
                           " is not a member of the group it asked for");
    auto cached = w->groups.find(worldRanks);
    if (cached != w->groups.end())
      return std::shared_ptr<Communicator>(cached->second);
    std::shared_ptr<Communicator> sub;
    if (w->mpi) {
      auto made = w->mpi->group(worldRanks);
      if (!made)
        return made.status();
      sub = *made;
    }
    auto created = create(w, sub, worldRanks);
    if (!created)
      return created.status();
    w->groups[worldRanks] = *created;
    return std::shared_ptr<Communicator>(*created);
  }

  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    std::string what = describe("all_reduce", count, dtype);
    ncclDataType_t type;
    if (!reductionType(dtype, type))
      return fail(std::string("all_reduce cannot reduce ") + dtypeName(dtype));
    return collective(what, "all_reduce", count, dtype, op, 0, [&] {
      return ncclAllReduce(send, recv, size_t(count), type, reductionOp(op),
                           comm, stream);
    });
  }

  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    std::string what = describe("all_gather", count, dtype);
    size_t bytes = size_t(count) * dtypeSize(dtype);
    // In place is NCCL's kind only: send is this rank's block of recv.
    if (send != static_cast<uint8_t *>(recv) + myRank * bytes &&
        overlap(send, bytes, recv, mySize * bytes))
      return fail("all_gather's send must be block " + std::to_string(myRank) +
                  " of recv or lie outside it");
    return collective(what, "all_gather", count, dtype, ReduceOp::Sum, 0, [&] {
      return ncclAllGather(send, recv, bytes, ncclUint8, comm, stream);
    });
  }

  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    std::string what = describe("reduce_scatter", count, dtype);
    ncclDataType_t type;
    if (!reductionType(dtype, type))
      return fail(std::string("reduce_scatter cannot reduce ") +
                  dtypeName(dtype));
    size_t bytes = size_t(count) * dtypeSize(dtype);
    if (recv != static_cast<const uint8_t *>(send) + myRank * bytes &&
        overlap(recv, bytes, send, mySize * bytes))
      return fail("reduce_scatter's recv must be block " +
                  std::to_string(myRank) + " of send or lie outside it");
    return collective(what, "reduce_scatter", count, dtype, op, 0, [&] {
      return ncclReduceScatter(send, recv, size_t(count), type, reductionOp(op),
                               comm, stream);
    });
  }

  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    std::string what = describe("broadcast", count, dtype);
    if (root < 0 || root >= mySize)
      return fail("broadcast root " + std::to_string(root) +
                  " is not a rank of the group");
    return collective(
        what, "broadcast", count, dtype, ReduceOp::Sum, root, [&] {
          return ncclBroadcast(buffer, buffer, size_t(count) * dtypeSize(dtype),
                               ncclUint8, root, comm, stream);
        });
  }

  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    std::string what = describe("all_to_all", count, dtype);
    if (send == recv && count > 0 && mySize > 1)
      return fail("all_to_all cannot run in place");
    // A send and a receive per peer, itself included.
    size_t bytes = size_t(count) * dtypeSize(dtype);
    std::vector<Transfer> blocks;
    for (int peer = 0; peer < mySize; ++peer) {
      auto *from = static_cast<const uint8_t *>(send) + peer * bytes;
      blocks.push_back({true, const_cast<uint8_t *>(from), bytes, peer});
      blocks.push_back(
          {false, static_cast<uint8_t *>(recv) + peer * bytes, bytes, peer});
    }
    return collective(what, "all_to_all", count, dtype, ReduceOp::Sum, 0,
                      [&] { return enqueueGroup(blocks, comm, stream); });
  }

  std::shared_ptr<CommEvent> send(const void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return transfer(true, const_cast<void *>(buffer), bytes, peer, tag);
  }
  std::shared_ptr<CommEvent> recv(void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return transfer(false, buffer, bytes, peer, tag);
  }

  void abort(const std::string &message) override {
    // Stop this process's kernels, then the other ranks (MPI_Abort).
    std::string reason =
        "rank " + std::to_string(worldRank) + " failed: " + message;
    (void)abortAll(reason);
    if (mpi)
      mpi->abort(message); // prints the message; does not return
    std::fprintf(stderr, "loom: %s\n", reason.c_str());
    std::fflush(stderr);
  }

  /// Launches the held-back sends and receives as one NCCL group.
  void flush() {
    if (transfers.empty())
      return;
    std::vector<Transfer> batch = std::move(transfers);
    std::shared_ptr<Launch> launch = std::move(pending);
    transfers.clear();
    pending = nullptr;
    std::string what = "rank " + std::to_string(worldRank) + ": " +
                       std::to_string(batch.size()) +
                       " sends and receives of group " + groupName(memberRanks);
    start(*launch, what, [&] { return enqueueGroup(batch, comm, stream); });
  }

  /// Launches the held-back sends and receives of every communicator of
  /// this process. Called before the host blocks: until the wait ends this
  /// rank posts nothing more, so a transfer it held back could only stall a
  /// peer, for instance one whose collective waits on the receive that
  /// matches it.
  void flushAll() {
    for (NCCLCommunicator *communicator : processCommunicators())
      communicator->flush();
  }

  /// Polls a launched operation to its end, the timeout or an error.
  Status finish(const Launch &launch, const std::string &what) {
    if (!launch.status)
      return launch.status;
    flushAll();
    while (true) {
      if (!comm)
        return Status::error(what + ": the NCCL communicator was aborted (" +
                             abortedBecause + ")");
      // The error first: kernels that stop on one may still let the event
      // complete.
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      if (state != ncclSuccess && state != ncclInProgress)
        return abortAll(what + " failed in NCCL: " + ncclMessage(state));
      cudaError_t done = cudaEventQuery(launch.done);
      if (done == cudaSuccess)
        return Status::ok();
      if (done != cudaErrorNotReady)
        return abortAll(what + " failed in CUDA: " + cudaGetErrorString(done));
      if (Clock::now() > launch.deadline)
        return abortAll(what + " timed out after " +
                        std::to_string(options.timeout.count()) + " ms");
      std::this_thread::yield();
    }
  }

  /// Aborts every NCCL communicator of the process: a compute stream may be
  /// waiting on another one's operation, which could then never end.
  Status abortAll(const std::string &reason) {
    for (NCCLCommunicator *communicator : processCommunicators())
      (void)communicator->abortNCCL(reason);
    return Status::error(reason);
  }

  /// Aborts the NCCL communicator (its kernels stop); its operations fail.
  Status abortNCCL(const std::string &reason) {
    if (comm) {
      ncclCommAbort(comm);
      comm = nullptr;
      abortedBecause = reason;
    }
    return Status::error(reason);
  }

  /// The world communicator keeps the process's shared state alive.
  void own(std::shared_ptr<World> state) { ownedWorld = std::move(state); }

  cudaStream_t stream = nullptr;
  /// Recorded on another stream by orderAfter.
  cudaEvent_t ordering = nullptr;

private:
  /// This communicator, the world's and every group's of this process.
  std::vector<NCCLCommunicator *> processCommunicators() {
    std::vector<NCCLCommunicator *> all = {this};
    if (std::shared_ptr<World> w = world.lock()) {
      if (w->communicator && w->communicator != this)
        all.push_back(w->communicator);
      for (auto &entry : w->groups)
        if (entry.second.get() != this)
          all.push_back(entry.second.get());
    }
    return all;
  }

  std::shared_ptr<CommEvent> fail(const std::string &message) {
    return completedEvent(
        Status::error("rank " + std::to_string(worldRank) + ": " + message));
  }

  std::string describe(const char *kind, int64_t count, DType dtype) {
    return "rank " + std::to_string(worldRank) + ": " + kind + " #" +
           std::to_string(sequence++) + " of group " + groupName(memberRanks) +
           " (" + std::to_string(count) + " x " + dtypeName(dtype) + ")";
  }

  std::shared_ptr<CommEvent> event(std::shared_ptr<Launch> launch,
                                   std::string what);

  /// Checks, in checking mode, that every rank called the same collective
  /// (one small all-gather over MPI), then launches it after the sends and
  /// receives posted before it.
  std::shared_ptr<CommEvent>
  collective(const std::string &what, const char *kind, int64_t count,
             DType dtype, ReduceOp op, int root,
             const std::function<ncclResult_t()> &enqueue) {
    if (count < 0)
      return fail(std::string(kind) + " of " + std::to_string(count) +
                  " elements");
    if (options.checkCollectives && mpi) {
      flushAll(); // the exchange below blocks
      int64_t mine[5] = {int64_t(kind[0]) * 256 + kind[4], count,
                         int64_t(dtype), int64_t(op), root};
      std::vector<int64_t> all(size_t(5 * mySize));
      if (Status status =
              mpi->allGather(mine, all.data(), 5, DType::I64)->wait();
          !status)
        return completedEvent(status);
      for (int k = 0; k < mySize; ++k)
        if (!std::equal(mine, mine + 5, all.begin() + 5 * k))
          return fail("mismatched collectives: this rank called " +
                      std::string(kind) + "(" + std::to_string(count) + " x " +
                      dtypeName(dtype) + "), rank " +
                      std::to_string(memberRanks[size_t(k)]) +
                      " called something else (" +
                      std::to_string(all[size_t(5 * k + 1)]) + " elements)");
    }
    flush();
    auto launch = std::make_shared<Launch>();
    start(*launch, what, enqueue);
    return event(launch, what);
  }

  /// Enqueues an operation on the stream and records its event.
  void start(Launch &launch, const std::string &what,
             const std::function<ncclResult_t()> &enqueue) {
    launch.launched = true;
    launch.deadline = Clock::now() + options.timeout;
    if (!comm) {
      launch.status =
          Status::error(what + ": the NCCL communicator was aborted (" +
                        abortedBecause + ")");
      return;
    }
    cudaSetDevice(device);
    if (Status status =
            settle(comm, enqueue(), launch.deadline, options.timeout);
        !status) {
      launch.status = abortAll(what + status.message());
      return;
    }
    if (cudaEventCreateWithFlags(&launch.done, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(launch.done, stream) != cudaSuccess)
      launch.status = abortAll(
          what + " failed in CUDA: " + cudaGetErrorString(cudaGetLastError()));
  }

  std::shared_ptr<CommEvent> transfer(bool isSend, void *buffer, uint64_t bytes,
                                      int peer, int tag) {
    if (peer < 0 || peer >= mySize || peer == myRank)
      return fail(std::string(isSend ? "send to" : "recv from") + " rank " +
                  std::to_string(peer) + " of a group of " +
                  std::to_string(mySize));
    std::string what = "rank " + std::to_string(worldRank) + ": " +
                       (isSend ? "send to" : "recv from") + " rank " +
                       std::to_string(memberRanks[size_t(peer)]) + " (tag " +
                       std::to_string(tag) + ", " + std::to_string(bytes) +
                       " bytes)";
    if (!pending)
      pending = std::make_shared<Launch>();
    transfers.push_back({isSend, buffer, size_t(bytes), peer});
    return event(pending, what);
  }

  // Groups see the world weakly: the world communicator owns it.
  std::weak_ptr<World> world;
  std::shared_ptr<World> ownedWorld;
  std::shared_ptr<Communicator> mpi; // this group's, null without MPI
  ncclComm_t comm = nullptr;         // null once aborted
  std::string abortedBecause;
  std::vector<int> memberRanks;
  CommOptions options;
  int myRank = 0, mySize = 1, worldRank = 0, device = 0;
  uint64_t sequence = 0;
  std::vector<Transfer> transfers; // held back
  std::shared_ptr<Launch> pending; // theirs
};

class NCCLEvent : public CommEvent {
public:
  NCCLEvent(std::shared_ptr<NCCLCommunicator> owner,
            std::shared_ptr<Launch> launch, std::string what)
      : owner(std::move(owner)), launch(std::move(launch)),
        what(std::move(what)) {}

  Status wait() override {
    if (finished)
      return status;
    if (!launch->launched)
      owner->flush();
    status = owner->finish(*launch, what);
    finished = true;
    return status;
  }

  bool waitOnStream(void *other) override {
    if (!launch->launched)
      owner->flush();
    if (finished || !launch->status || !launch->done)
      return false;
    return cudaStreamWaitEvent(static_cast<cudaStream_t>(other), launch->done,
                               0) == cudaSuccess;
  }

private:
  std::shared_ptr<NCCLCommunicator> owner;
  std::shared_ptr<Launch> launch;
  std::string what;
  bool finished = false;
  Status status;
};

std::shared_ptr<CommEvent>
NCCLCommunicator::event(std::shared_ptr<Launch> launch, std::string what) {
  return std::make_shared<NCCLEvent>(shared_from_this(), std::move(launch),
                                     std::move(what));
}

/// The number of ranks a launcher started (1 when none is known).
int launchedRanks() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name))
      return std::max(1, std::atoi(value));
  return 1;
}

/// Picks this rank's GPU: its local rank (among the ranks on its host)
/// modulo the GPUs it sees. Two ranks on one GPU are refused before NCCL
/// refuses them less clearly. Collective over the world.
Status chooseDevice(World &world) {
  std::string prefix = "rank " + std::to_string(world.rank) + ": ";
  constexpr size_t hostBytes = 64;
  std::vector<char> hosts(hostBytes * size_t(world.size), 0);
  gethostname(hosts.data() + hostBytes * size_t(world.rank), hostBytes - 1);
  if (world.mpi)
    if (Status status = world.mpi
                            ->allGather(hosts.data() + hostBytes * world.rank,
                                        hosts.data(), hostBytes, DType::I1)
                            ->wait();
        !status)
      return status;
  auto host = [&](int rank) { return hosts.data() + hostBytes * size_t(rank); };
  int local = 0;
  for (int k = 0; k < world.rank; ++k)
    local += std::strcmp(host(k), host(world.rank)) == 0;

  struct Device {
    int32_t ok, index;
    char uuid[16];
  };
  std::vector<Device> devices(size_t(world.size), Device{});
  Device &mine = devices[size_t(world.rank)];
  int count = 0;
  cudaDeviceProp properties{};
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count > 0) {
    mine.index = local % count;
    error = cudaGetDeviceProperties(&properties, mine.index);
    if (error == cudaSuccess) {
      mine.ok = 1;
      std::memcpy(mine.uuid, properties.uuid.bytes, sizeof mine.uuid);
    }
  }
  if (world.mpi)
    if (Status status =
            world.mpi
                ->allGather(&mine, devices.data(), sizeof(Device), DType::I1)
                ->wait();
        !status)
      return status;
  if (!mine.ok)
    return Status::error(
        prefix + "no CUDA device (" +
        (error != cudaSuccess ? cudaGetErrorString(error) : "none visible") +
        ")");
  for (int k = 0; k < world.size; ++k)
    if (!devices[size_t(k)].ok)
      return Status::error(prefix + "rank " + std::to_string(k) +
                           " has no CUDA device");
  for (int j = 0; j < world.size; ++j)
    for (int k = j + 1; k < world.size; ++k)
      if (std::memcmp(devices[size_t(j)].uuid, devices[size_t(k)].uuid, 16) ==
          0)
        return Status::error(
            prefix + "ranks " + std::to_string(j) + " and " +
            std::to_string(k) + " would share GPU " +
            std::to_string(devices[size_t(j)].index) + " of host " + host(j) +
            ", but NCCL needs a GPU per rank: start at most as many ranks per "
            "host as it has GPUs");
  world.device = mine.index;
  return cudaSetDevice(world.device) == cudaSuccess
             ? Status::ok()
             : Status::error(prefix + "cannot use GPU " +
                             std::to_string(world.device));
}

} // namespace

bool loomrt::haveNCCL() { return true; }

StatusOr<std::shared_ptr<Communicator>>
loomrt::createNCCLCommunicator(const CommOptions &options) {
  auto world = std::make_shared<World>();
  world->options = options;
  if (haveMPI()) {
    // The bootstrap's own exchanges need no checking.
    CommOptions bootstrap = options;
    bootstrap.checkCollectives = false;
    auto mpi = createMPICommunicator(bootstrap);
    if (!mpi)
      return mpi.status();
    world->mpi = *mpi;
    world->rank = world->mpi->rank();
    world->size = world->mpi->size();
  } else if (int launched = launchedRanks(); launched > 1) {
    return Status::error(
        "this runtime was built without MPI, so its NCCL engine runs one rank "
        "only, not " +
        std::to_string(launched) + " (install libopenmpi-dev and reconfigure)");
  }
  if (Status status = chooseDevice(*world); !status)
    return status;
  std::vector<int> everyone(size_t(world->size), 0);
  for (int i = 0; i < world->size; ++i)
    everyone[size_t(i)] = i;
  auto created = NCCLCommunicator::create(world, world->mpi, everyone);
  if (!created)
    return created.status();
  world->communicator = created->get();
  (*created)->own(world);
  return std::shared_ptr<Communicator>(*created);
}

namespace loomrt {
/// The stream of an NCCL communicator, for tests that hold it up; not
/// declared in a header on purpose.
cudaStream_t ncclStreamForTesting(Communicator &communicator) {
  auto *nccl = dynamic_cast<NCCLCommunicator *>(&communicator);
  return nccl ? nccl->stream : nullptr;
}
} // namespace loomrt
