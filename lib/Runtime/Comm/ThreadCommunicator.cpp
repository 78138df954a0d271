//===- ThreadCommunicator.cpp - N ranks in one process --------------------===//
//
// The ranks are threads sharing memory, so a collective needs no transport:
// every rank posts its buffers, and after a barrier each rank computes its
// share straight from the others' buffers. All-reduce is a reduce-scatter
// (rank r reduces chunk r of every send buffer) followed by an all-gather
// (every rank copies the other chunks), so each byte is read N times in
// total, the same bus traffic as a ring, and it works in place. A barrier
// after the last read keeps every buffer alive until no rank reads it.
//
// Failure handling: every wait has the world's timeout; a rank that times
// out, finds mismatched arguments or calls abort() aborts the world, which
// wakes every waiting rank with that rank's message.
//
//===----------------------------------------------------------------------===//

#include "../CPU/BFloat16.h"
#include "loom/Runtime/Communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

using namespace loomrt;

namespace {

class World;

/// What one rank passed to a collective.
struct Post {
  const char *kind = "";
  DType dtype = DType::F32;
  int64_t count = 0;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  const void *send = nullptr;
  void *recv = nullptr;
};

/// A pending send or receive: whoever arrives second copies.
struct Transfer {
  const void *source = nullptr;
  void *destination = nullptr;
  uint64_t bytes = 0;
  bool done = false;
  Status status;
};

/// State shared by the members of one group.
struct GroupState {
  explicit GroupState(std::vector<int> members)
      : members(std::move(members)), posts(this->members.size()),
        arrived(this->members.size(), false),
        sequence(this->members.size(), 0) {}

  std::string name() const {
    std::string text = "[";
    for (size_t i = 0; i < members.size(); ++i)
      text += (i ? "," : "") + std::to_string(members[i]);
    return text + "]";
  }

  const std::vector<int> members;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Post> posts;
  /// Barrier: ranks arrived in the current phase, and completed phases.
  std::vector<bool> arrived;
  int arrivedCount = 0;
  /// Atomic so that a waiting rank can spin on it without the lock.
  std::atomic<uint64_t> phase{0};
  /// Collectives each rank has called, for messages.
  std::vector<uint64_t> sequence;
  /// Pending transfers by (source rank, destination rank, tag).
  std::map<std::tuple<int, int, int>, std::deque<std::shared_ptr<Transfer>>>
      sends, recvs;
};

class World {
public:
  World(int size, CommOptions options) : size(size), options(options) {}

  std::shared_ptr<GroupState> group(const std::vector<int> &members) {
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<GroupState> &state = groups[members];
    if (!state)
      state = std::make_shared<GroupState>(members);
    return state;
  }

  /// The first abort wins; every waiting rank wakes up.
  void abort(const std::string &message) {
    bool expected = false;
    if (aborting.compare_exchange_strong(expected, true)) {
      abortMessage = message;
      aborted.store(true, std::memory_order_release);
    }
    std::vector<std::shared_ptr<GroupState>> all;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto &entry : groups)
        all.push_back(entry.second);
    }
    for (auto &state : all) {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->changed.notify_all();
    }
  }

  bool isAborted() const { return aborted.load(std::memory_order_acquire); }
  /// Valid once isAborted().
  const std::string &message() const { return abortMessage; }

  const int size;
  const CommOptions options;

private:
  std::mutex mutex;
  std::map<std::vector<int>, std::shared_ptr<GroupState>> groups;
  std::atomic<bool> aborting{false}, aborted{false};
  std::string abortMessage;
};

/// Waits on the group's condition until `ready`, the world aborts or the
/// timeout passes; the error describes `what` from `rank`'s side.
template <typename Ready>
Status waitFor(World &world, GroupState &group,
               std::unique_lock<std::mutex> &lock, int worldRank,
               const std::string &what, Ready ready,
               const std::function<std::string()> &missingRanks = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + world.options.timeout;
  group.changed.wait_until(lock, deadline,
                           [&] { return ready() || world.isAborted(); });
  if (ready())
    return Status::ok();
  if (world.isAborted())
    return Status::error(world.message() + " (rank " +
                         std::to_string(worldRank) + " was in " + what + ")");
  std::string missing = missingRanks ? missingRanks() : "";
  std::string message = "rank " + std::to_string(worldRank) + ": " + what +
                        " timed out after " +
                        std::to_string(world.options.timeout.count()) + " ms" +
                        (missing.empty() ? "" : ", waiting for " + missing);
  lock.unlock();
  world.abort(message);
  lock.lock();
  return Status::error(message);
}

bool isReducible(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32 ||
         dtype == DType::I64 || dtype == DType::BF16;
}

/// How a reduction reads and writes elements of type T: as themselves, and
/// for bf16 (gradients kept in bf16) widened to f32, reduced in f32 and
/// rounded once, so the result does not depend on the order of the ranks.
template <typename T> struct Plain {
  using Acc = T;
  static void load(const T *in, Acc *out, int64_t count) {
    std::memcpy(out, in, size_t(count) * sizeof(T));
  }
  static Acc widen(T value) { return value; }
  static void store(const Acc *in, T *out, int64_t count) {
    std::memcpy(out, in, size_t(count) * sizeof(T));
  }
};
struct BF16AsF32 {
  using Acc = float;
  static void load(const cpu::BF16 *in, float *out, int64_t count) {
    cpu::widenBF16(in, out, count);
  }
  static float widen(cpu::BF16 value) { return cpu::widenBF16(value); }
  static void store(const float *in, cpu::BF16 *out, int64_t count) {
    cpu::roundToBF16(in, out, count);
  }
};

/// out[i] = op over k of in[k][i] for i in [begin, end).
template <typename T, typename Elements = Plain<T>>
void reduceRange(const std::vector<const void *> &in, void *out, int64_t begin,
                 int64_t end, ReduceOp op) {
  using Acc = typename Elements::Acc;
  // Block by block through a local accumulator: each inner loop is one
  // input against the accumulator, which the compiler vectorizes, and the
  // output (possibly one of the inputs, in place) is written only after
  // every input's block has been read.
  constexpr int64_t kBlock = 1024;
  Acc acc[kBlock];
  T *result = static_cast<T *>(out);
  size_t n = in.size();
  for (int64_t start = begin; start < end; start += kBlock) {
    int64_t count = std::min(kBlock, end - start);
    Elements::load(static_cast<const T *>(in[0]) + start, acc, count);
    for (size_t k = 1; k < n; ++k) {
      const T *values = static_cast<const T *>(in[k]) + start;
      if (op == ReduceOp::Max)
        for (int64_t i = 0; i < count; ++i) {
          Acc value = Elements::widen(values[i]);
          acc[i] = value > acc[i] ? value : acc[i];
        }
      else
        for (int64_t i = 0; i < count; ++i)
          acc[i] += Elements::widen(values[i]);
    }
    if (op == ReduceOp::Avg)
      for (int64_t i = 0; i < count; ++i)
        acc[i] = Acc(acc[i] / Acc(n));
    Elements::store(acc, result + start, count);
  }
}

void reduce(DType dtype, const std::vector<const void *> &in, void *out,
            int64_t begin, int64_t end, ReduceOp op) {
  switch (dtype) {
  case DType::F32:
    return reduceRange<float>(in, out, begin, end, op);
  case DType::F64:
    return reduceRange<double>(in, out, begin, end, op);
  case DType::I32:
    return reduceRange<int32_t>(in, out, begin, end, op);
  case DType::BF16:
    return reduceRange<cpu::BF16, BF16AsF32>(in, out, begin, end, op);
  default:
    return reduceRange<int64_t>(in, out, begin, end, op);
  }
}

class ThreadCommunicator : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<World> world,
                     std::shared_ptr<GroupState> state, int rank)
      : world(std::move(world)), state(std::move(state)), myRank(rank) {}

  int rank() const override { return myRank; }
  int size() const override { return int(state->members.size()); }
  const std::vector<int> &members() const override { return state->members; }

  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) override {
    int me = worldRank();
    if (worldRanks.empty() ||
        !std::is_sorted(worldRanks.begin(), worldRanks.end()) ||
        std::adjacent_find(worldRanks.begin(), worldRanks.end()) !=
            worldRanks.end() ||
        worldRanks.front() < 0 || worldRanks.back() >= world->size)
      return Status::error("a group needs sorted, distinct ranks in [0, " +
                           std::to_string(world->size) + ")");
    auto it = std::find(worldRanks.begin(), worldRanks.end(), me);
    if (it == worldRanks.end())
      return Status::error("rank " + std::to_string(me) +
                           " is not a member of the group it asked for");
    return std::shared_ptr<Communicator>(std::make_shared<ThreadCommunicator>(
        world, world->group(worldRanks), int(it - worldRanks.begin())));
  }

  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    Post post{"all_reduce", dtype, count, op, 0, send, recv};
    return collective(
        post,
        [&](const std::vector<Post> &posts) {
          int n = size();
          std::vector<const void *> inputs;
          for (const Post &p : posts)
            inputs.push_back(p.send);
          int64_t begin = count * myRank / n, end = count * (myRank + 1) / n;
          reduce(dtype, inputs, recv, begin, end, op);
          return Status::ok();
        },
        [&](const std::vector<Post> &posts) {
          // Every rank's chunk is final: copy the others' chunks.
          int n = size();
          size_t width = dtypeSize(dtype);
          for (int k = 0; k < n; ++k) {
            if (k == myRank)
              continue;
            int64_t begin = count * k / n, end = count * (k + 1) / n;
            std::memcpy(static_cast<uint8_t *>(recv) + begin * width,
                        static_cast<const uint8_t *>(posts[k].recv) +
                            begin * width,
                        size_t(end - begin) * width);
          }
          return Status::ok();
        });
  }

  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    Post post{"all_gather", dtype, count, ReduceOp::Sum, 0, send, recv};
    return collective(post, [&](const std::vector<Post> &posts) {
      size_t bytes = size_t(count) * dtypeSize(dtype);
      for (size_t k = 0; k < posts.size(); ++k)
        std::memmove(static_cast<uint8_t *>(recv) + k * bytes, posts[k].send,
                     bytes);
      return Status::ok();
    });
  }

  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    Post post{"reduce_scatter", dtype, count, op, 0, send, recv};
    return collective(post, [&](const std::vector<Post> &posts) {
      size_t offset = size_t(myRank) * size_t(count) * dtypeSize(dtype);
      std::vector<const void *> inputs;
      for (const Post &p : posts)
        inputs.push_back(static_cast<const uint8_t *>(p.send) + offset);
      // Reduce into a scratch row first: recv may alias a peer's input.
      std::vector<uint8_t> result(size_t(count) * dtypeSize(dtype));
      reduce(dtype, inputs, result.data(), 0, count, op);
      std::memcpy(recv, result.data(), result.size());
      return Status::ok();
    });
  }

  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    if (root < 0 || root >= size())
      return fail("broadcast root " + std::to_string(root) +
                  " is not a rank of the group");
    Post post{"broadcast", dtype, count, ReduceOp::Sum, root, buffer, buffer};
    return collective(post, [&](const std::vector<Post> &posts) {
      if (myRank != root)
        std::memcpy(buffer, posts[root].send, size_t(count) * dtypeSize(dtype));
      return Status::ok();
    });
  }

  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    if (send == recv && count > 0 && size() > 1)
      return fail("all_to_all cannot run in place");
    Post post{"all_to_all", dtype, count, ReduceOp::Sum, 0, send, recv};
    return collective(post, [&](const std::vector<Post> &posts) {
      size_t bytes = size_t(count) * dtypeSize(dtype);
      for (size_t k = 0; k < posts.size(); ++k)
        std::memcpy(static_cast<uint8_t *>(recv) + k * bytes,
                    static_cast<const uint8_t *>(posts[k].send) +
                        size_t(myRank) * bytes,
                    bytes);
      return Status::ok();
    });
  }

  std::shared_ptr<CommEvent> send(const void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return transfer(/*isSend=*/true, const_cast<void *>(buffer), bytes, peer,
                    tag);
  }
  std::shared_ptr<CommEvent> recv(void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return transfer(/*isSend=*/false, buffer, bytes, peer, tag);
  }

  void abort(const std::string &message) override {
    world->abort("rank " + std::to_string(worldRank()) + " failed: " + message);
  }

private:
  int worldRank() const { return state->members[size_t(myRank)]; }

  std::shared_ptr<CommEvent> fail(const std::string &message) {
    return completedEvent(
        Status::error("rank " + std::to_string(worldRank()) + ": " + message));
  }

  /// One barrier phase of the group.
  Status barrier(const std::string &what) {
    GroupState &group = *state;
    std::unique_lock<std::mutex> lock(group.mutex);
    uint64_t phase = group.phase;
    group.arrived[size_t(myRank)] = true;
    if (++group.arrivedCount == size()) {
      group.arrivedCount = 0;
      std::fill(group.arrived.begin(), group.arrived.end(), false);
      ++group.phase;
      group.changed.notify_all();
      return Status::ok();
    }
    // Most barriers complete within microseconds: poll briefly, yielding the
    // core (ranks may outnumber cores), before sleeping on the condition
    // variable, whose wake-up costs tens of microseconds.
    lock.unlock();
    auto spinUntil =
        std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (group.phase.load(std::memory_order_acquire) == phase &&
           !world->isAborted() && std::chrono::steady_clock::now() < spinUntil)
      std::this_thread::yield();
    lock.lock();
    auto missing = [&] {
      std::vector<int> absent;
      for (size_t k = 0; k < group.arrived.size(); ++k)
        if (!group.arrived[k])
          absent.push_back(group.members[k]);
      std::string text = absent.size() == 1 ? "rank " : "ranks ";
      for (size_t k = 0; k < absent.size(); ++k)
        text += (k ? ", " : "") + std::to_string(absent[k]);
      return text;
    };
    return waitFor(
        *world, group, lock, worldRank(), what,
        [&] { return group.phase != phase; }, missing);
  }

  /// Posts, checks that every rank posted the same operation, runs `share`
  /// (and `finish` after another barrier), then waits until no rank reads
  /// this rank's buffers any more.
  template <typename Share, typename Finish>
  std::shared_ptr<CommEvent> collective(const Post &post, Share share,
                                        Finish finish) {
    if (world->isAborted())
      return completedEvent(Status::error(world->message() + " (rank " +
                                          std::to_string(worldRank()) +
                                          " was in " + post.kind + ")"));
    if (std::string("broadcast") != post.kind &&
        std::string("all_gather") != post.kind &&
        std::string("all_to_all") != post.kind && !isReducible(post.dtype))
      return fail(std::string(post.kind) + " cannot reduce " +
                  dtypeName(post.dtype));
    std::string what;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->posts[size_t(myRank)] = post;
      what = std::string(post.kind) + " #" +
             std::to_string(state->sequence[size_t(myRank)]++) + " of group " +
             state->name();
    }
    if (Status status = barrier(what); !status)
      return completedEvent(status);
    std::vector<Post> posts;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      posts = state->posts;
    }
    if (Status status = checkMatch(posts, what); !status) {
      world->abort(status.message());
      return completedEvent(status);
    }
    Status status = share(posts);
    if (status) {
      status = barrier(what);
      if (status)
        status = finish(posts);
    }
    if (status)
      status = barrier(what);
    return completedEvent(status);
  }

  template <typename Share>
  std::shared_ptr<CommEvent> collective(const Post &post, Share share) {
    return collective(post, share,
                      [](const std::vector<Post> &) { return Status::ok(); });
  }

  /// Every rank must have called the same collective with the same
  /// arguments (the check costs nothing next to a barrier).
  Status checkMatch(const std::vector<Post> &posts, const std::string &what) {
    const Post &first = posts[0];
    for (size_t k = 1; k < posts.size(); ++k) {
      const Post &p = posts[k];
      if (std::string(p.kind) != first.kind || p.dtype != first.dtype ||
          p.count != first.count || p.op != first.op || p.root != first.root)
        return Status::error("mismatched collectives in " + what + ": rank " +
                             std::to_string(state->members[0]) + " called " +
                             describe(first) + ", rank " +
                             std::to_string(state->members[k]) + " called " +
                             describe(p));
    }
    return Status::ok();
  }

  static std::string describe(const Post &post) {
    std::string text = std::string(post.kind) + "(" +
                       std::to_string(post.count) + " x " +
                       dtypeName(post.dtype);
    if (std::string("all_reduce") == post.kind ||
        std::string("reduce_scatter") == post.kind)
      text += std::string(", ") + reduceOpName(post.op);
    if (std::string("broadcast") == post.kind)
      text += ", root " + std::to_string(post.root);
    return text + ")";
  }

  class TransferEvent : public CommEvent {
  public:
    TransferEvent(std::shared_ptr<World> world,
                  std::shared_ptr<GroupState> state,
                  std::shared_ptr<Transfer> transfer, int worldRank,
                  std::string what)
        : world(std::move(world)), state(std::move(state)),
          transfer(std::move(transfer)), worldRank(worldRank),
          what(std::move(what)) {}
    Status wait() override {
      std::unique_lock<std::mutex> lock(state->mutex);
      Status status = waitFor(*world, *state, lock, worldRank, what,
                              [&] { return transfer->done; });
      return status ? transfer->status : status;
    }

  private:
    std::shared_ptr<World> world;
    std::shared_ptr<GroupState> state;
    std::shared_ptr<Transfer> transfer;
    int worldRank;
    std::string what;
  };

  std::shared_ptr<CommEvent> transfer(bool isSend, void *buffer, uint64_t bytes,
                                      int peer, int tag) {
    if (peer < 0 || peer >= size() || peer == myRank)
      return fail(std::string(isSend ? "send to" : "recv from") + " rank " +
                  std::to_string(peer) + " of a group of " +
                  std::to_string(size()));
    if (world->isAborted())
      return completedEvent(Status::error(world->message()));
    std::string what = std::string(isSend ? "send to" : "recv from") +
                       " rank " + std::to_string(state->members[size_t(peer)]) +
                       " (tag " + std::to_string(tag) + ", " +
                       std::to_string(bytes) + " bytes)";
    std::lock_guard<std::mutex> lock(state->mutex);
    auto key = isSend ? std::make_tuple(myRank, peer, tag)
                      : std::make_tuple(peer, myRank, tag);
    auto &waiting = isSend ? state->recvs[key] : state->sends[key];
    if (!waiting.empty()) {
      // The peer is already waiting: copy now and complete both sides.
      std::shared_ptr<Transfer> other = waiting.front();
      waiting.pop_front();
      Status status;
      if (other->bytes != bytes)
        status = Status::error("rank " + std::to_string(worldRank()) + ": " +
                               what + " does not match the peer's " +
                               std::to_string(other->bytes) + " bytes");
      else if (isSend)
        std::memcpy(other->destination, buffer, bytes);
      else
        std::memcpy(buffer, other->source, bytes);
      other->status = status;
      other->done = true;
      state->changed.notify_all();
      return completedEvent(status);
    }
    auto pending = std::make_shared<Transfer>();
    pending->bytes = bytes;
    if (isSend)
      pending->source = buffer;
    else
      pending->destination = buffer;
    (isSend ? state->sends[key] : state->recvs[key]).push_back(pending);
    return std::make_shared<TransferEvent>(world, state, pending, worldRank(),
                                           what);
  }

  std::shared_ptr<World> world;
  std::shared_ptr<GroupState> state;
  int myRank;
};

class CompletedEvent : public CommEvent {
public:
  explicit CompletedEvent(Status status) : status(std::move(status)) {}
  Status wait() override { return status; }

private:
  Status status;
};

} // namespace

CommEvent::~CommEvent() = default;
bool CommEvent::waitOnStream(void *) { return false; }
int64_t CommEvent::completedAtNs() const { return -1; }
bool CommEvent::poll() { return true; }
Communicator::~Communicator() = default;
bool Communicator::onDevice() const { return false; }
void Communicator::orderAfter(void *) {}

std::shared_ptr<CommEvent> loomrt::completedEvent(Status status) {
  return std::make_shared<CompletedEvent>(std::move(status));
}

std::vector<std::shared_ptr<Communicator>>
loomrt::createThreadCommunicators(int size, const CommOptions &options) {
  auto world = std::make_shared<World>(size, options);
  std::vector<int> everyone(size_t(std::max(size, 0)));
  for (int i = 0; i < size; ++i)
    everyone[size_t(i)] = i;
  std::shared_ptr<GroupState> state = world->group(everyone);
  std::vector<std::shared_ptr<Communicator>> ranks;
  for (int i = 0; i < size; ++i)
    ranks.push_back(std::make_shared<ThreadCommunicator>(world, state, i));
  return ranks;
}
