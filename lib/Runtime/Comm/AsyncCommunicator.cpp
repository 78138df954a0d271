//===- AsyncCommunicator.cpp - Collectives on a progress thread -----------===//
//
// The threads engine runs a collective inside the call, in the calling
// thread: the executor's posting returns only once the data has moved, so
// nothing overlaps it. This wrapper gives any such engine a progress
// thread per communicator: an operation is queued and returns at once, the
// thread runs the queue in posting order (the order every member posts
// in, so the engine's rendezvous pair up as before) and completes each
// event, recording when. Compute on the calling thread overlaps it, as it
// does with MPI's non-blocking operations and NCCL's streams.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

using namespace loomrt;

namespace {

class AsyncEvent : public CommEvent {
public:
  Status wait() override {
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return finished; });
    return status;
  }
  int64_t completedAtNs() const override {
    std::lock_guard<std::mutex> lock(mutex);
    return finished ? finishedNs : -1;
  }
  void finish(Status result) {
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    {
      std::lock_guard<std::mutex> lock(mutex);
      status = std::move(result);
      finishedNs = now;
      finished = true;
    }
    done.notify_all();
  }

private:
  mutable std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  Status status;
  int64_t finishedNs = -1;
};

class AsyncCommunicator : public Communicator {
public:
  explicit AsyncCommunicator(std::shared_ptr<Communicator> inner)
      : inner(std::move(inner)), worker([this] { progress(); }) {}

  ~AsyncCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    ready.notify_all();
    worker.join();
  }

  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  const std::vector<int> &members() const override { return inner->members(); }
  bool onDevice() const override { return inner->onDevice(); }
  void orderAfter(void *stream) override { inner->orderAfter(stream); }
  void abort(const std::string &message) override { inner->abort(message); }

  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) override {
    std::lock_guard<std::mutex> lock(groupsMutex);
    auto found = groups.find(worldRanks);
    if (found != groups.end())
      return found->second;
    StatusOr<std::shared_ptr<Communicator>> made = inner->group(worldRanks);
    if (!made)
      return made.status();
    std::shared_ptr<Communicator> wrapped = wrapAsync(*made);
    groups[worldRanks] = wrapped;
    return wrapped;
  }

  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    return post([=](Communicator &c) {
      return c.allReduce(send, recv, count, dtype, op);
    });
  }
  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    return post(
        [=](Communicator &c) { return c.allGather(send, recv, count, dtype); });
  }
  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    return post([=](Communicator &c) {
      return c.reduceScatter(send, recv, count, dtype, op);
    });
  }
  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    return post([=](Communicator &c) {
      return c.broadcast(buffer, count, dtype, root);
    });
  }
  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    return post(
        [=](Communicator &c) { return c.allToAll(send, recv, count, dtype); });
  }
  // Transfers are posted without waiting in the engine already (they pair
  // up by peer and tag, apart from the collectives' order): straight
  // through, so that two ranks sending to each other first do not each
  // wait on a progress thread for the other's receive.
  std::shared_ptr<CommEvent> send(const void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return inner->send(buffer, bytes, peer, tag);
  }
  std::shared_ptr<CommEvent> recv(void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return inner->recv(buffer, bytes, peer, tag);
  }

private:
  using Operation = std::function<std::shared_ptr<CommEvent>(Communicator &)>;

  std::shared_ptr<CommEvent> post(Operation operation) {
    auto event = std::make_shared<AsyncEvent>();
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back({std::move(operation), event});
    }
    ready.notify_one();
    return event;
  }

  /// The progress thread: runs the queue in posting order, each collective
  /// to its end before the next, as the calling thread would have.
  void progress() {
    while (true) {
      std::pair<Operation, std::shared_ptr<AsyncEvent>> next;
      {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty())
          return;
        next = std::move(queue.front());
        queue.pop_front();
      }
      next.second->finish(next.first(*inner)->wait());
    }
  }

  std::shared_ptr<Communicator> inner;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<Operation, std::shared_ptr<AsyncEvent>>> queue;
  bool stopping = false;
  std::mutex groupsMutex;
  std::map<std::vector<int>, std::shared_ptr<Communicator>> groups;
  // Last: started once everything it uses exists.
  std::thread worker;
};

} // namespace

std::shared_ptr<Communicator>
loomrt::wrapAsync(std::shared_ptr<Communicator> inner) {
  return std::make_shared<AsyncCommunicator>(std::move(inner));
}
