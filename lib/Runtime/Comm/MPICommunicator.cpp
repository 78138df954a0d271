//===- MPICommunicator.cpp - One rank per process, over MPI ---------------===//
//
// `mpirun -np N loom-run ...`: rank and size come from MPI_COMM_WORLD, groups
// are MPI communicators over their members, and every operation is MPI's
// nonblocking form, so an event is an MPI_Request. Waits poll MPI_Test
// against the timeout rather than block in MPI_Wait, which could never
// time out. With CommOptions::checkCollectives every collective first
// exchanges its arguments and fails on a mismatch (MPI itself would hang or
// corrupt memory).
//
//===----------------------------------------------------------------------===//

#include "../CPU/BFloat16.h"
#include "loom/Runtime/Communicator.h"

// The C API only: the deprecated C++ bindings would need another library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>

using namespace loomrt;

namespace {

using Clock = std::chrono::steady_clock;

/// bf16 has no MPI type: its values travel as 16-bit integers and reduce
/// with these operations, pair by pair in f32, rounded after each pair.
template <bool isMax>
void reduceBF16(void *in, void *inout, int *length, MPI_Datatype *) {
  auto *a = static_cast<const cpu::BF16 *>(in);
  auto *b = static_cast<cpu::BF16 *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = cpu::widenBF16(a[i]), y = cpu::widenBF16(b[i]);
    b[i] = cpu::roundToBF16(isMax ? (x > y ? x : y) : x + y);
  }
}

MPI_Op mpiOp(DType dtype, ReduceOp op) {
  if (dtype != DType::BF16)
    return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
  // Created once, after MPI_Init (the first bf16 reduction comes after it).
  static MPI_Op sum = [] {
    MPI_Op created;
    MPI_Op_create(&reduceBF16<false>, /*commute=*/1, &created);
    return created;
  }();
  static MPI_Op max = [] {
    MPI_Op created;
    MPI_Op_create(&reduceBF16<true>, /*commute=*/1, &created);
    return created;
  }();
  return op == ReduceOp::Max ? max : sum;
}

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return MPI_UINT16_T;
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

class MPIEvent : public CommEvent {
public:
  MPIEvent(MPI_Request request, std::chrono::milliseconds timeout,
           std::string what, std::function<void()> then = nullptr)
      : request(request), deadline(Clock::now() + timeout), timeout(timeout),
        what(std::move(what)), then(std::move(then)) {}

  Status wait() override {
    if (finished)
      return status;
    int flag = 0;
    while (true) {
      if (MPI_Test(&request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        status = Status::error(what + " failed in MPI");
        break;
      }
      if (flag) {
        noteCompleted();
        if (then)
          then();
        break;
      }
      if (Clock::now() > deadline) {
        status = Status::error(what + " timed out after " +
                               std::to_string(timeout.count()) + " ms");
        break;
      }
      // Other ranks may share this core (mpirun --oversubscribe).
      std::this_thread::yield();
    }
    finished = true;
    return status;
  }

  /// One MPI_Test, which moves every operation of this process on: the
  /// executor polls between kernels, so that a transfer whose peer waits
  /// for it does not wait for this rank's next wait. (A completed request
  /// is freed and reads as complete to the wait that follows.)
  bool poll() override {
    if (finished || completedNs >= 0)
      return true;
    int flag = 0;
    if (MPI_Test(&request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return true; // the wait reports it
    if (flag)
      noteCompleted();
    return flag != 0;
  }

  int64_t completedAtNs() const override { return completedNs; }

private:
  void noteCompleted() {
    if (completedNs < 0)
      completedNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        Clock::now().time_since_epoch())
                        .count();
  }

  MPI_Request request;
  int64_t completedNs = -1;
  Clock::time_point deadline;
  std::chrono::milliseconds timeout;
  std::string what;
  std::function<void()> then;
  bool finished = false;
  Status status;
};

class MPICommunicator : public Communicator {
public:
  MPICommunicator(MPI_Comm comm, std::vector<int> members, CommOptions options)
      : comm(comm), memberRanks(std::move(members)), options(options) {
    MPI_Comm_rank(comm, &myRank);
    MPI_Comm_size(comm, &mySize);
    MPI_Comm_rank(MPI_COMM_WORLD, &myWorldRank);
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  const std::vector<int> &members() const override { return memberRanks; }

  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) override {
    int worldSize;
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
    if (worldRanks.empty() ||
        !std::is_sorted(worldRanks.begin(), worldRanks.end()) ||
        std::adjacent_find(worldRanks.begin(), worldRanks.end()) !=
            worldRanks.end() ||
        worldRanks.front() < 0 || worldRanks.back() >= worldSize)
      return Status::error("a group needs sorted, distinct ranks in [0, " +
                           std::to_string(worldSize) + ")");
    if (!std::binary_search(worldRanks.begin(), worldRanks.end(), myWorldRank))
      return Status::error("rank " + std::to_string(myWorldRank) +
                           " is not a member of the group it asked for");
    auto cached = groups->find(worldRanks);
    if (cached != groups->end())
      return cached->second;
    MPI_Group world, subset;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, int(worldRanks.size()), worldRanks.data(), &subset);
    MPI_Comm sub;
    // Collective over the members only (not the whole world).
    int failed = MPI_Comm_create_group(MPI_COMM_WORLD, subset, 0, &sub);
    MPI_Group_free(&subset);
    MPI_Group_free(&world);
    if (failed != MPI_SUCCESS)
      return Status::error("cannot create an MPI group");
    auto created = std::make_shared<MPICommunicator>(sub, worldRanks, options);
    created->groups = groups;
    (*groups)[worldRanks] = created;
    return std::shared_ptr<Communicator>(created);
  }

  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    std::string what = describe("all_reduce", count, dtype, op);
    if (Status status = prepare("all_reduce", count, dtype, op, 0, true);
        !status)
      return completedEvent(status);
    MPI_Request request;
    MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, int(count),
                   mpiType(dtype), mpiOp(dtype, op), comm, &request);
    std::function<void()> then;
    if (op == ReduceOp::Avg)
      then = [=] { divide(recv, count, dtype, mySize); };
    return event(request, what, then);
  }

  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    std::string what = describe("all_gather", count, dtype, ReduceOp::Sum);
    if (Status status =
            prepare("all_gather", count, dtype, ReduceOp::Sum, 0, false);
        !status)
      return completedEvent(status);
    int bytes = int(count * int64_t(dtypeSize(dtype)));
    bool inPlace = send == static_cast<uint8_t *>(recv) + myRank * bytes;
    MPI_Request request;
    MPI_Iallgather(inPlace ? MPI_IN_PLACE : send, bytes, MPI_BYTE, recv, bytes,
                   MPI_BYTE, comm, &request);
    return event(request, what);
  }

  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    std::string what = describe("reduce_scatter", count, dtype, op);
    if (Status status =
            prepare("reduce_scatter", count * mySize, dtype, op, 0, true);
        !status)
      return completedEvent(status);
    MPI_Request request;
    MPI_Ireduce_scatter_block(send, recv, int(count), mpiType(dtype),
                              mpiOp(dtype, op), comm, &request);
    std::function<void()> then;
    if (op == ReduceOp::Avg)
      then = [=] { divide(recv, count, dtype, mySize); };
    return event(request, what, then);
  }

  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    std::string what = describe("broadcast", count, dtype, ReduceOp::Sum);
    if (root < 0 || root >= mySize)
      return fail("broadcast root " + std::to_string(root) +
                  " is not a rank of the group");
    if (Status status =
            prepare("broadcast", count, dtype, ReduceOp::Sum, root, false);
        !status)
      return completedEvent(status);
    MPI_Request request;
    MPI_Ibcast(buffer, int(count * int64_t(dtypeSize(dtype))), MPI_BYTE, root,
               comm, &request);
    return event(request, what);
  }

  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    std::string what = describe("all_to_all", count, dtype, ReduceOp::Sum);
    if (send == recv && count > 0 && mySize > 1)
      return fail("all_to_all cannot run in place");
    if (Status status = prepare("all_to_all", count * mySize, dtype,
                                ReduceOp::Sum, 0, false);
        !status)
      return completedEvent(status);
    int bytes = int(count * int64_t(dtypeSize(dtype)));
    MPI_Request request;
    MPI_Ialltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm, &request);
    return event(request, what);
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
    std::fprintf(stderr, "loom: rank %d failed: %s\n", myWorldRank,
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /// Group communicators by members, shared by every communicator of the
  /// process (asking twice for a group returns the same one).
  std::shared_ptr<std::map<std::vector<int>, std::shared_ptr<Communicator>>>
      groups = std::make_shared<
          std::map<std::vector<int>, std::shared_ptr<Communicator>>>();

private:
  std::shared_ptr<CommEvent> fail(const std::string &message) {
    return completedEvent(
        Status::error("rank " + std::to_string(myWorldRank) + ": " + message));
  }

  std::string describe(const char *kind, int64_t count, DType dtype,
                       ReduceOp op) {
    std::string name = "[";
    for (size_t i = 0; i < memberRanks.size(); ++i)
      name += (i ? "," : "") + std::to_string(memberRanks[i]);
    return "rank " + std::to_string(myWorldRank) + ": " + kind + " #" +
           std::to_string(sequence++) + " of group " + name + "] (" +
           std::to_string(count) + " x " + dtypeName(dtype) + ")";
  }

  /// Checks what MPI cannot take, and in checking mode that every rank
  /// called the same collective.
  Status prepare(const char *kind, int64_t count, DType dtype, ReduceOp op,
                 int root, bool reduces) {
    std::string prefix = "rank " + std::to_string(myWorldRank) + ": ";
    if (reduces && mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(prefix + kind + " cannot reduce " +
                           dtypeName(dtype));
    if (count * int64_t(dtypeSize(dtype)) > INT_MAX)
      return Status::error(prefix + kind + " of " + std::to_string(count) +
                           " elements exceeds MPI's int counts");
    if (!options.checkCollectives)
      return Status::ok();
    // The call as numbers (the kind by its index), equal on every rank.
    static const char *const kKinds[] = {"all_reduce", "all_gather",
                                         "reduce_scatter", "broadcast",
                                         "all_to_all"};
    int64_t kindIndex = std::find_if(std::begin(kKinds), std::end(kKinds),
                                     [&](const char *name) {
                                       return std::string(name) == kind;
                                     }) -
                        std::begin(kKinds);
    int64_t mine[5] = {kindIndex, count, int64_t(dtype), int64_t(op), root};
    std::vector<int64_t> all(size_t(5 * mySize));
    MPI_Allgather(mine, 5, MPI_INT64_T, all.data(), 5, MPI_INT64_T, comm);
    auto describe = [&](const int64_t *call) {
      std::string text = call[0] >= 0 && call[0] < 5 ? kKinds[call[0]] : "?";
      bool known = call[2] >= 0 && call[2] <= int64_t(DType::I64);
      text += "(" + std::to_string(call[1]) + " x " +
              (known ? dtypeName(DType(call[2])) : "?");
      if (call[0] == 0 || call[0] == 2)
        text += std::string(", ") + (call[3] >= 0 && call[3] <= 2
                                         ? reduceOpName(ReduceOp(call[3]))
                                         : "?");
      if (call[0] == 3)
        text += ", root " + std::to_string(call[4]);
      return text + ")";
    };
    for (int k = 0; k < mySize; ++k)
      if (!std::equal(mine, mine + 5, all.begin() + 5 * k))
        return Status::error(prefix + "mismatched collectives: rank " +
                             std::to_string(myWorldRank) + " called " +
                             describe(mine) + ", rank " +
                             std::to_string(memberRanks[size_t(k)]) +
                             " called " + describe(all.data() + 5 * k));
    return Status::ok();
  }

  std::shared_ptr<CommEvent> event(MPI_Request request, const std::string &what,
                                   std::function<void()> then = nullptr) {
    return std::make_shared<MPIEvent>(request, options.timeout, what,
                                      std::move(then));
  }

  static void divide(void *data, int64_t count, DType dtype, int by) {
    for (int64_t i = 0; i < count; ++i)
      switch (dtype) {
      case DType::F32:
        static_cast<float *>(data)[i] /= float(by);
        break;
      case DType::F64:
        static_cast<double *>(data)[i] /= double(by);
        break;
      case DType::I32:
        static_cast<int32_t *>(data)[i] /= by;
        break;
      case DType::BF16: {
        auto *values = static_cast<cpu::BF16 *>(data);
        values[i] = cpu::roundToBF16(cpu::widenBF16(values[i]) / float(by));
        break;
      }
      default:
        static_cast<int64_t *>(data)[i] /= by;
        break;
      }
  }

  std::shared_ptr<CommEvent> transfer(bool isSend, void *buffer, uint64_t bytes,
                                      int peer, int tag) {
    if (peer < 0 || peer >= mySize || peer == myRank)
      return fail(std::string(isSend ? "send to" : "recv from") + " rank " +
                  std::to_string(peer) + " of a group of " +
                  std::to_string(mySize));
    if (bytes > uint64_t(INT_MAX))
      return fail("a transfer of " + std::to_string(bytes) +
                  " bytes exceeds MPI's int counts");
    std::string what = "rank " + std::to_string(myWorldRank) + ": " +
                       (isSend ? "send to" : "recv from") + " rank " +
                       std::to_string(memberRanks[size_t(peer)]) + " (tag " +
                       std::to_string(tag) + ", " + std::to_string(bytes) +
                       " bytes)";
    MPI_Request request;
    if (isSend)
      MPI_Isend(buffer, int(bytes), MPI_BYTE, peer, tag, comm, &request);
    else
      MPI_Irecv(buffer, int(bytes), MPI_BYTE, peer, tag, comm, &request);
    return event(request, what);
  }

  MPI_Comm comm;
  std::vector<int> memberRanks;
  CommOptions options;
  int myRank = 0, mySize = 1, myWorldRank = 0;
  uint64_t sequence = 0;
};

} // namespace

bool loomrt::haveMPI() { return true; }

StatusOr<std::shared_ptr<Communicator>>
loomrt::createMPICommunicator(const CommOptions &options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS)
      return Status::error("MPI_Init failed");
    // Finalize at exit so that mpirun sees a clean end.
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized)
        MPI_Finalize();
    });
  }
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> everyone(size_t(size), 0);
  for (int i = 0; i < size; ++i)
    everyone[size_t(i)] = i;
  return std::shared_ptr<Communicator>(
      std::make_shared<MPICommunicator>(MPI_COMM_WORLD, everyone, options));
}
