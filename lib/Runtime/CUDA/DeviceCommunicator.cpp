//===- DeviceCommunicator.cpp - Host engines on device buffers
//-------------===//
//
// wrapForDevice: N thread ranks on one GPU cannot use NCCL (it refuses two
// ranks on one device), so their collectives run on the threads engine with
// the bytes staged through host memory. Every operation copies its input to
// the host on the wrapper's own stream (after the compute work ordered
// before it: orderAfter), runs the host engine, and copies the result back;
// the result's copy is recorded by an event that the compute stream can wait
// on. Receives complete only when their sender sends, so their copy back
// happens when they are waited for. Slow (two copies and a host round trip
// per operation) but exact, and it works over MPI as well.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

using namespace loomrt;

namespace {

Status cudaFailure(const std::string &what, cudaError_t error) {
  return Status::error(what + " failed in CUDA: " + cudaGetErrorString(error));
}

/// The end of a staged operation: `done` is recorded after the copy back.
class StagedEvent : public CommEvent {
public:
  StagedEvent(int device, cudaStream_t stream, std::vector<uint8_t> staging)
      : device(device), stream(stream), staging(std::move(staging)) {}
  ~StagedEvent() override {
    if (done)
      cudaEventDestroy(done);
  }

  /// Records `done` on the stream (after the copy back was enqueued).
  Status record() {
    cudaError_t error = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (!error)
      error = cudaEventRecord(done, stream);
    return error ? cudaFailure("recording a communication event", error)
                 : Status::ok();
  }

  Status wait() override {
    if (finished)
      return status;
    finished = true;
    cudaSetDevice(device);
    if (host) {
      // A receive: the host engine fills `staging`, then it goes to the GPU.
      status = host->wait();
      if (status && receiveInto) {
        cudaError_t error =
            cudaMemcpyAsync(receiveInto, staging.data(), staging.size(),
                            cudaMemcpyHostToDevice, stream);
        status =
            error ? cudaFailure("copying a received buffer", error) : record();
      }
      if (!status)
        return status;
    }
    if (done)
      if (cudaError_t error = cudaEventSynchronize(done))
        status = cudaFailure("a staged communication", error);
    return status;
  }

  /// A receive's host engine may need driving (MPI); the copy back is
  /// enqueued by the wait.
  bool poll() override { return !host || finished || host->poll(); }

  bool waitOnStream(void *other) override {
    if (host && !finished)
      return false; // the copy back is not enqueued yet
    if (!done || !status)
      return false;
    return cudaStreamWaitEvent(static_cast<cudaStream_t>(other), done, 0) ==
           cudaSuccess;
  }

  int device;
  cudaStream_t stream;
  std::vector<uint8_t> staging;
  cudaEvent_t done = nullptr;
  /// Operations that complete on the host later (send, recv).
  std::shared_ptr<CommEvent> host;
  void *receiveInto = nullptr;
  bool finished = false;
  Status status;
};

class StagedCommunicator
    : public Communicator,
      public std::enable_shared_from_this<StagedCommunicator> {
public:
  StagedCommunicator(std::shared_ptr<Communicator> host, int device,
                     cudaStream_t stream)
      : host_(std::move(host)), device_(device), stream_(stream) {}
  ~StagedCommunicator() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    if (ordering_)
      cudaEventDestroy(ordering_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::vector<int> &members() const override { return host_->members(); }
  bool onDevice() const override { return true; }

  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &worldRanks) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = groups_.find(worldRanks);
    if (found != groups_.end())
      return found->second;
    StatusOr<std::shared_ptr<Communicator>> host = host_->group(worldRanks);
    if (!host)
      return host.status();
    StatusOr<std::shared_ptr<Communicator>> wrapped =
        wrapForDevice(*host, device_);
    if (wrapped)
      groups_[worldRanks] = *wrapped;
    return wrapped;
  }

  void orderAfter(void *stream) override {
    cudaSetDevice(device_);
    if (!ordering_)
      cudaEventCreateWithFlags(&ordering_, cudaEventDisableTiming);
    cudaEventRecord(ordering_, static_cast<cudaStream_t>(stream));
    cudaStreamWaitEvent(stream_, ordering_, 0);
  }

  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    return collective(
        send, count, dtype, recv, count, Result::InPlace, [&](uint8_t *buffer) {
          return host_->allReduce(buffer, buffer, count, dtype, op);
        });
  }

  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    // The gathered blocks land behind the staged input.
    int64_t total = count * size();
    return collective(send, count, dtype, recv, total, Result::Behind,
                      [&](uint8_t *buffer) {
                        return host_->allGather(
                            buffer, buffer + bytes(count, dtype), count, dtype);
                      });
  }

  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    int64_t total = count * size();
    return collective(
        send, total, dtype, recv, count, Result::Behind, [&](uint8_t *buffer) {
          return host_->reduceScatter(buffer, buffer + bytes(total, dtype),
                                      count, dtype, op);
        });
  }

  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    return collective(buffer, count, dtype, buffer, count, Result::InPlace,
                      [&](uint8_t *staged) {
                        return host_->broadcast(staged, count, dtype, root);
                      });
  }

  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    int64_t total = count * size();
    return collective(send, total, dtype, recv, total, Result::Behind,
                      [&](uint8_t *buffer) {
                        return host_->allToAll(
                            buffer, buffer + bytes(total, dtype), count, dtype);
                      });
  }

  std::shared_ptr<CommEvent> send(const void *buffer, uint64_t count, int peer,
                                  int tag) override {
    cudaSetDevice(device_);
    auto event = std::make_shared<StagedEvent>(device_, stream_,
                                               std::vector<uint8_t>(count));
    if (Status status = toHost(event->staging.data(), buffer, count); !status)
      return completedEvent(status);
    event->host = host_->send(event->staging.data(), count, peer, tag);
    return event;
  }

  std::shared_ptr<CommEvent> recv(void *buffer, uint64_t count, int peer,
                                  int tag) override {
    auto event = std::make_shared<StagedEvent>(device_, stream_,
                                               std::vector<uint8_t>(count));
    event->receiveInto = buffer;
    event->host = host_->recv(event->staging.data(), count, peer, tag);
    return event;
  }

  void abort(const std::string &message) override { host_->abort(message); }

private:
  static uint64_t bytes(int64_t count, DType dtype) {
    return uint64_t(count) * dtypeSize(dtype);
  }

  /// Copies `count` device bytes to the host once what was ordered before
  /// is done.
  Status toHost(uint8_t *staging, const void *device, uint64_t count) {
    cudaError_t error = cudaMemcpyAsync(staging, device, count,
                                        cudaMemcpyDeviceToHost, stream_);
    if (!error)
      error = cudaStreamSynchronize(stream_);
    return error ? cudaFailure("staging a buffer to the host", error)
                 : Status::ok();
  }

  /// Where a host engine leaves a staged operation's result.
  enum class Result { InPlace, Behind };

  /// Stages `inCount` elements of `in` at the front of a host buffer, runs
  /// `run` on it (the host engine writes its result over the input, or
  /// behind it), and copies the `outCount` result elements back to `out`.
  template <typename Run>
  std::shared_ptr<CommEvent>
  collective(const void *in, int64_t inCount, DType dtype, void *out,
             int64_t outCount, Result where, Run run) {
    cudaSetDevice(device_);
    uint64_t inBytes = bytes(inCount, dtype), outBytes = bytes(outCount, dtype);
    uint64_t resultOffset = where == Result::Behind ? inBytes : 0;
    auto event = std::make_shared<StagedEvent>(
        device_, stream_, std::vector<uint8_t>(resultOffset + outBytes));
    uint8_t *staging = event->staging.data();
    if (Status status = toHost(staging, in, inBytes); !status)
      return completedEvent(status);
    if (Status status = run(staging)->wait(); !status)
      return completedEvent(status);
    if (cudaError_t error =
            cudaMemcpyAsync(out, staging + resultOffset, outBytes,
                            cudaMemcpyHostToDevice, stream_))
      return completedEvent(cudaFailure("copying a result to the GPU", error));
    if (Status status = event->record(); !status)
      return completedEvent(status);
    return event;
  }

  std::shared_ptr<Communicator> host_;
  int device_;
  cudaStream_t stream_;
  cudaEvent_t ordering_ = nullptr;
  std::mutex mutex_;
  std::map<std::vector<int>, std::shared_ptr<Communicator>> groups_;
};

} // namespace

StatusOr<std::shared_ptr<Communicator>>
loomrt::wrapForDevice(std::shared_ptr<Communicator> host, int gpu) {
  if (host->onDevice())
    return host;
  int device = gpu;
  if (gpu >= 0) {
    if (cudaError_t error = cudaSetDevice(gpu))
      return cudaFailure("selecting GPU " + std::to_string(gpu), error);
  } else if (cudaError_t error = cudaGetDevice(&device)) {
    return cudaFailure("finding the current GPU", error);
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t error =
          cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking))
    return cudaFailure("creating a communication stream", error);
  return std::shared_ptr<Communicator>(
      std::make_shared<StagedCommunicator>(std::move(host), device, stream));
}
