//===- Streams.cpp - Emulated streams and events --------------------------===//
//
// Work enqueued on a created stream (kernels, copies, memsets, matmuls) is
// deferred: it runs, in stream order, only when something has to wait for it
// (a stream or event synchronization, a cudaStreamWaitEvent whose stream
// runs, the legacy default stream, cudaFree). That is one legal schedule of
// a device's, and the most telling one: work that a missing synchronization
// leaves unordered has not happened yet when it is read, so the reader sees
// stale data (fresh device memory is NaN) instead of racing and sometimes
// winning.
//
// The legacy default stream (0) runs its work at once, after everything the
// blocking streams hold (as a device orders them); non-blocking streams are
// not ordered against it. Failures of deferred work are sticky, as on a
// device: every later call reports them until cudaDeviceReset.
//
// One device-wide recursive mutex serializes the calls of every host thread
// (thread ranks share the emulated device), and work runs on the thread that
// made it needed.
//
// Stream capture (CUDA graphs) records the work enqueued on a capturing
// stream instead of deferring it; a graph launch enqueues the recorded work
// again, in order, as one more item of the stream it is launched on.
// Synchronizing a capturing stream fails and invalidates the capture, as on
// a device; events cannot be recorded or waited for on it (the runtime does
// not capture them).
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace loomrt::cuda;

namespace {

struct Stream;

/// An entry of a stream's queue: work, or a wait for another stream to have
/// run up to a point (cudaStreamWaitEvent).
struct Item {
  uint64_t sequence = 0;
  std::function<void()> work;
  std::shared_ptr<Stream> waitOn;
  uint64_t waitUntil = 0;
};

/// The work of a captured graph, in stream order.
using Work = std::vector<std::function<void()>>;

struct Stream {
  /// Ordered against the legacy default stream (cudaStreamCreate's kind).
  bool blocking = true;
  std::deque<Item> pending;
  /// Items ever enqueued, and the sequence number of the last one run.
  uint64_t enqueued = 0, executed = 0;
  /// While capturing: the work recorded so far, and whether a call that a
  /// capture does not allow has invalidated it.
  std::unique_ptr<Work> capture;
  bool captureInvalid = false;
};

struct Event {
  bool timing = true;
  /// Where the last record was enqueued, and its place there; no stream
  /// once it is known complete (or before any record).
  std::shared_ptr<Stream> stream;
  uint64_t sequence = 0;
  bool recorded = false, timed = false;
  std::chrono::steady_clock::time_point time;
};

struct Device {
  std::recursive_mutex mutex;
  std::map<const void *, std::shared_ptr<Stream>> streams;
  std::map<const void *, std::shared_ptr<Event>> events;
  /// Captured graphs and their instantiations (both just the work; a
  /// launched instantiation lives until its launches have run).
  std::map<const void *, std::unique_ptr<Work>> graphs;
  std::map<const void *, std::shared_ptr<const Work>> execs;
  cudaError_t sticky = cudaSuccess;
};

/// Never destroyed: programs may still call in from static destructors.
Device &device() {
  static Device *d = new Device;
  return *d;
}

bool isLegacy(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy ||
         stream == cudaStreamPerThread;
}

/// Runs `s` up to (and including) the item numbered `upTo`.
void runUpTo(Stream &s, uint64_t upTo) {
  while (s.executed < upTo && !s.pending.empty()) {
    Item item = std::move(s.pending.front());
    s.pending.pop_front();
    if (item.waitOn)
      runUpTo(*item.waitOn, item.waitUntil);
    else if (device().sticky == cudaSuccess)
      item.work();
    s.executed = item.sequence;
  }
}

void runAll(Stream &s) { runUpTo(s, s.enqueued); }

/// What the legacy default stream waits for before its own work.
void runBlockingStreams() {
  for (auto &entry : device().streams)
    if (entry.second->blocking)
      runAll(*entry.second);
}

/// The stream behind a handle, or null (an unknown handle).
std::shared_ptr<Stream> lookup(cudaStream_t stream) {
  auto it = device().streams.find(stream);
  return it == device().streams.end() ? nullptr : it->second;
}

std::shared_ptr<Event> lookup(cudaEvent_t event) {
  auto it = device().events.find(event);
  return it == device().events.end() ? nullptr : it->second;
}

bool complete(const Event &e) {
  return !e.stream || e.stream->executed >= e.sequence;
}

cudaError_t createStream(cudaStream_t *handle, unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  auto stream = std::make_shared<Stream>();
  stream->blocking = !(flags & cudaStreamNonBlocking);
  *handle = reinterpret_cast<cudaStream_t>(stream.get());
  device().streams[*handle] = std::move(stream);
  return cudaSuccess;
}

cudaError_t createEvent(cudaEvent_t *handle, unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  auto event = std::make_shared<Event>();
  event->timing = !(flags & cudaEventDisableTiming);
  *handle = reinterpret_cast<cudaEvent_t>(event.get());
  device().events[*handle] = std::move(event);
  return cudaSuccess;
}

/// LOOM_EMULATOR_STATS's counts, printed at exit.
struct Stats {
  std::atomic<uint64_t> calls[size_t(emulator::Call::Count)] = {};
  Stats() {
    const char *enabled = std::getenv("LOOM_EMULATOR_STATS");
    if (enabled && *enabled && std::string(enabled) != "0")
      std::atexit(print);
  }
  static void print();
};

Stats &stats() {
  static Stats *s = new Stats;
  return *s;
}

void Stats::print() {
  static const char *const names[] = {"kernel launches",
                                      "cuBLASLt matmuls",
                                      "slowed-algorithm matmuls",
                                      "copies to the device",
                                      "copies to the host",
                                      "copies on the device",
                                      "memsets",
                                      "host synchronizations",
                                      "cudaMalloc/cudaMallocHost",
                                      "frees",
                                      "NVRTC compilations",
                                      "CUDA graph launches"};
  static_assert(sizeof names / sizeof *names == size_t(emulator::Call::Count),
                "a name per counter");
  std::fprintf(stderr, "emulator: calls made (LOOM_EMULATOR_STATS):\n");
  for (size_t i = 0; i < size_t(emulator::Call::Count); ++i)
    std::fprintf(stderr, "  %-28s %llu\n", names[i],
                 static_cast<unsigned long long>(stats().calls[i].load()));
}

} // namespace

void emulator::count(Call call) { ++stats().calls[size_t(call)]; }

cudaError_t emulator::enqueue(cudaStream_t stream, std::function<void()> work) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  if (d.sticky)
    return d.sticky;
  if (isLegacy(stream)) {
    // A failure of this work is the device's, not the call's.
    runBlockingStreams();
    if (!d.sticky)
      work();
    return cudaSuccess;
  }
  std::shared_ptr<Stream> s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (s->capture) {
    s->capture->push_back(std::move(work));
    return cudaSuccess;
  }
  Item item;
  item.sequence = ++s->enqueued;
  item.work = std::move(work);
  s->pending.push_back(std::move(item));
  return cudaSuccess;
}

/// Fails a call that a capturing stream does not allow, invalidating the
/// capture; cudaSuccess when `s` is not capturing.
cudaError_t refuseWhileCapturing(Stream &s) {
  if (!s.capture)
    return cudaSuccess;
  s.captureInvalid = true;
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t emulator::synchronizeStream(cudaStream_t stream) {
  count(Call::Synchronize);
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  if (isLegacy(stream)) {
    runBlockingStreams();
  } else if (std::shared_ptr<Stream> s = lookup(stream)) {
    if (cudaError_t error = refuseWhileCapturing(*s))
      return error;
    runAll(*s);
  } else {
    return cudaErrorInvalidResourceHandle;
  }
  return d.sticky;
}

cudaError_t emulator::synchronizeDevice() {
  count(Call::Synchronize);
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  for (auto &entry : d.streams)
    runAll(*entry.second);
  return d.sticky;
}

void emulator::failDevice(cudaError_t error) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  if (!d.sticky)
    d.sticky = error;
}

cudaError_t emulator::deviceError() {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  return device().sticky;
}

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return createStream(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream,
                                      unsigned int flags) {
  return createStream(stream, flags);
}

// Work already enqueued still runs, as on a device.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Stream> s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  runAll(*s);
  d.streams.erase(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return emulator::synchronizeStream(stream);
}

// Done once it has run: a query makes the stream's work run, so that a
// polling loop ends.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return emulator::synchronizeStream(stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Event> e = lookup(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (d.sticky)
    return d.sticky;
  // The wait is for the event's last record before this call.
  if (complete(*e))
    return cudaSuccess;
  if (isLegacy(stream)) {
    runUpTo(*e->stream, e->sequence);
    return d.sticky;
  }
  std::shared_ptr<Stream> s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (cudaError_t error = refuseWhileCapturing(*s))
    return error;
  Item item;
  item.sequence = ++s->enqueued;
  item.waitOn = e->stream;
  item.waitUntil = e->sequence;
  s->pending.push_back(std::move(item));
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return emulator::synchronizeDevice(); }

// Lets the emulator's tests go on after a failed kernel: the pending work
// is run (or, with the error set, dropped) and the sticky error cleared.
cudaError_t cudaDeviceReset() {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  for (auto &entry : d.streams)
    runAll(*entry.second);
  d.sticky = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return createEvent(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  return createEvent(event, flags);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  return device().events.erase(event) ? cudaSuccess
                                      : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Event> e = lookup(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  e->recorded = true;
  e->timed = false;
  if (isLegacy(stream)) {
    runBlockingStreams();
    e->stream = nullptr;
    e->timed = true;
    e->time = std::chrono::steady_clock::now();
    return d.sticky;
  }
  std::shared_ptr<Stream> s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (cudaError_t error = refuseWhileCapturing(*s))
    return error;
  e->stream = s;
  e->sequence = s->enqueued + 1;
  const uint64_t sequence = e->sequence;
  // Timestamps only the record that is still the event's last when it runs.
  return emulator::enqueue(stream, [e, sequence] {
    if (e->sequence != sequence || e->stream == nullptr)
      return;
    e->timed = true;
    e->time = std::chrono::steady_clock::now();
  });
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  if (isLegacy(stream))
    return cudaErrorStreamCaptureUnsupported;
  std::shared_ptr<Stream> s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (s->capture)
    return cudaErrorIllegalState;
  s->capture = std::make_unique<Work>();
  s->captureInvalid = false;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *status) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  std::shared_ptr<Stream> s = isLegacy(stream) ? nullptr : lookup(stream);
  if (!s && !isLegacy(stream))
    return cudaErrorInvalidResourceHandle;
  *status = !s || !s->capture   ? cudaStreamCaptureStatusNone
            : s->captureInvalid ? cudaStreamCaptureStatusInvalidated
                                : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Stream> s = isLegacy(stream) ? nullptr : lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (!s->capture)
    return cudaErrorIllegalState;
  std::unique_ptr<Work> work = std::move(s->capture);
  *graph = nullptr;
  if (s->captureInvalid)
    return cudaErrorStreamCaptureInvalidated;
  *graph = reinterpret_cast<cudaGraph_t>(work.get());
  d.graphs[*graph] = std::move(work);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  auto it = d.graphs.find(graph);
  if (it == d.graphs.end())
    return cudaErrorInvalidResourceHandle;
  auto work = std::make_shared<const Work>(*it->second);
  *exec = reinterpret_cast<cudaGraphExec_t>(const_cast<Work *>(work.get()));
  d.execs[*exec] = std::move(work);
  return cudaSuccess;
}

// The whole graph is one item of the stream: it runs when the stream does,
// after what was enqueued before it.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  emulator::count(emulator::Call::GraphLaunch);
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  auto it = d.execs.find(exec);
  if (it == d.execs.end())
    return cudaErrorInvalidResourceHandle;
  if (std::shared_ptr<Stream> s = isLegacy(stream) ? nullptr : lookup(stream))
    if (cudaError_t error = refuseWhileCapturing(*s))
      return error;
  std::shared_ptr<const Work> work = it->second;
  return emulator::enqueue(stream, [work] {
    for (const std::function<void()> &item : *work)
      if (emulator::deviceError() == cudaSuccess)
        item();
  });
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  return device().execs.erase(exec) ? cudaSuccess
                                    : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::recursive_mutex> lock(device().mutex);
  return device().graphs.erase(graph) ? cudaSuccess
                                      : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  emulator::count(emulator::Call::Synchronize);
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Event> e = lookup(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (!complete(*e))
    runUpTo(*e->stream, e->sequence);
  return d.sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  Device &d = device();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  std::shared_ptr<Event> a = lookup(start), b = lookup(end);
  if (!a || !b || !a->timing || !b->timing || !a->recorded || !b->recorded)
    return cudaErrorInvalidResourceHandle;
  if (!complete(*a) || !complete(*b))
    return cudaErrorNotReady;
  if (d.sticky)
    return d.sticky;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

} // extern "C"
