//===- Emulator.cpp - Runs emulated kernel launches on the host -----------===//
//
// A launch runs its blocks one after another on the host thread that runs
// its stream's work (Streams.cpp). A block's threads are fibers (ucontext);
// its warps run in turn, each as far as it gets (its lanes in turn until
// each reaches a barrier or exits, on through the warp's own barriers),
// and a barrier opens when every thread it waits for has arrived:
//   - __syncthreads: every thread of the block that has not exited;
//   - a warp barrier (__syncwarp, shuffles): every lane of the warp, none of
//     which may have exited (a device would hang or be undefined there).
// When nothing can run and some threads still wait, the launch fails with a
// deadlock report instead of hanging.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include "CUDAEmulator/Device.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace loomrt::cuda;
using namespace loomrt::cuda::emulator;

namespace {

/// Each fiber's stack: the kernels keep small per-thread arrays.
constexpr size_t kStackBytes = size_t(256) << 10;
/// What a device allows (an H100/H200): dynamic shared memory without and
/// with the per-kernel opt-in, threads per block, grid dims.
constexpr size_t kDefaultSharedBytes = 48 << 10;
constexpr size_t kOptInSharedBytes = 227 << 10;
constexpr unsigned kMaxBlockThreads = 1024;

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Exited };

/// A cp.async copy in flight: its source bytes, read when it was issued.
struct AsyncCopy {
  unsigned char *dst;
  unsigned char bytes[16];
  int size;
  /// Its commit group; the thread's `committedGroups` while uncommitted.
  uint64_t group;
};

struct Fiber {
  ucontext_t context;
  ThreadPosition position;
  State state = State::Runnable;
  /// __syncthreads_and's operand while waiting, then its result.
  int predicate = 1;
  /// cp.async copies not landed yet, in issue order, and the groups
  /// committed so far.
  std::vector<AsyncCopy> copies;
  uint64_t committedGroups = 0;
};

/// A stack that stays mapped for the thread's later launches.
struct Stack {
  void *base = nullptr;
  Stack() {
    base = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      std::perror("emulator: mmap of a fiber stack");
      std::abort();
    }
  }
  ~Stack() { munmap(base, kStackBytes); }
  Stack(const Stack &) = delete;
  Stack &operator=(const Stack &) = delete;
};

constexpr size_t kGatherBytes = 32;

struct Block {
  const std::function<void()> *body = nullptr;
  std::vector<Fiber> fibers;
  Fiber *current = nullptr;
  ucontext_t scheduler;
  unsigned char *shared = nullptr;
  size_t sharedBytes = 0;
  std::vector<uint64_t> exchange;
  /// gatherWarp's area: kGatherBytes per lane.
  std::vector<unsigned char> gather;
  /// Set by fail(): the launch stops after this block.
  std::string failure;
};

thread_local Block *activeBlock = nullptr;
thread_local std::vector<std::unique_ptr<Stack>> stacks;
thread_local cudaError_t lastError = cudaSuccess;

/// cudaFuncAttributeMaxDynamicSharedMemorySize per kernel.
std::mutex attributesMutex;
std::map<const void *, size_t> sharedLimits;

Block &block() {
  if (!activeBlock) {
    std::fprintf(stderr, "emulator: a device function ran outside a launch\n");
    std::abort();
  }
  return *activeBlock;
}

std::string describe(const uint3 &v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," +
         std::to_string(v.z) + ")";
}

/// Suspends the running fiber and returns to the block's scheduler.
void yieldToScheduler() {
  Block &b = block();
  swapcontext(&b.current->context, &b.scheduler);
}

void fiberMain() {
  Block &b = block();
  (*b.body)();
  b.current->state = State::Exited;
  // uc_link returns to the scheduler.
}

/// Opens the warp barrier of threads [begin, end) (a warp) when all of them
/// wait at it; whether it opened.
bool openWarpBarrier(Block &b, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i)
    if (b.fibers[i].state != State::AtWarpBarrier)
      return false;
  for (size_t i = begin; i < end; ++i)
    b.fibers[i].state = State::Runnable;
  return true;
}

/// Opens the barriers whose threads have all arrived; false when none could
/// open although some threads wait (a deadlock).
bool openBarriers(Block &b, unsigned warpsPerBlock) {
  bool anyWaiting = false, blockBarrierComplete = true;
  int all = 1;
  for (Fiber &f : b.fibers) {
    if (f.state == State::Exited)
      continue;
    anyWaiting = true;
    if (f.state != State::AtBlockBarrier)
      blockBarrierComplete = false;
    else
      all &= f.predicate != 0;
  }
  if (!anyWaiting)
    return true;
  if (blockBarrierComplete) {
    for (Fiber &f : b.fibers)
      if (f.state == State::AtBlockBarrier) {
        f.state = State::Runnable;
        f.predicate = all;
      }
    return true;
  }
  bool opened = false;
  for (unsigned w = 0; w < warpsPerBlock; ++w)
    opened |= openWarpBarrier(b, size_t(w) * 32,
                              std::min(b.fibers.size(), size_t(w + 1) * 32));
  return opened;
}

std::string deadlockReport(const Block &b) {
  size_t atBlock = 0, atWarp = 0, exited = 0;
  for (const Fiber &f : b.fibers) {
    atBlock += f.state == State::AtBlockBarrier;
    atWarp += f.state == State::AtWarpBarrier;
    exited += f.state == State::Exited;
  }
  return "deadlock in block " + describe(b.fibers[0].position.block) + ": " +
         std::to_string(atBlock) + " threads at __syncthreads, " +
         std::to_string(atWarp) + " at a warp barrier, " +
         std::to_string(exited) + " exited";
}

/// Runs one block to completion; false when it failed (b.failure says why).
bool runBlock(Block &b, unsigned warpsPerBlock) {
  for (size_t i = 0; i < b.fibers.size(); ++i) {
    Fiber &f = b.fibers[i];
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stacks[i]->base;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &b.scheduler;
    makecontext(&f.context, fiberMain, 0);
  }
  const size_t threads = b.fibers.size();
  for (bool reversed = false;; reversed = !reversed) {
    // Warps run in turn, each as far as it can: its lanes run in turn until
    // they block, and while they all wait at a warp barrier, it opens and
    // they go on. So a warp gets ahead of the others up to a block barrier
    // (or its end), and a read of what another warp writes without a
    // __syncthreads between them sees stale data. The order of the warps
    // flips every round, and that of a warp's lanes at every barrier, so
    // that a read of what another thread writes without a barrier sees
    // stale data one way or the other.
    for (size_t n = 0; n < warpsPerBlock; ++n) {
      const size_t w = reversed ? warpsPerBlock - 1 - n : n;
      const size_t begin = w * 32, end = std::min(threads, begin + 32);
      for (bool lanesReversed = reversed;; lanesReversed = !lanesReversed) {
        for (size_t i = 0; i < end - begin; ++i) {
          Fiber &f = b.fibers[lanesReversed ? end - 1 - i : begin + i];
          if (f.state != State::Runnable)
            continue;
          b.current = &f;
          swapcontext(&b.scheduler, &f.context);
          if (!b.failure.empty())
            return false;
        }
        if (!openWarpBarrier(b, begin, end))
          break;
      }
    }
    bool allExited = true;
    for (const Fiber &f : b.fibers)
      allExited &= f.state == State::Exited;
    if (allExited)
      return true;
    if (!openBarriers(b, warpsPerBlock)) {
      b.failure = deadlockReport(b);
      return false;
    }
  }
}

cudaError_t checkConfiguration(const void *kernel, dim3 grid, dim3 block,
                               size_t shared, std::string &why) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0) {
    why = "an empty grid or block";
    return cudaErrorInvalidConfiguration;
  }
  if (threads > kMaxBlockThreads || block.z > 64) {
    why = std::to_string(threads) + " threads per block";
    return cudaErrorInvalidConfiguration;
  }
  if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    why = "grid " + describe(uint3{grid.x, grid.y, grid.z});
    return cudaErrorInvalidConfiguration;
  }
  size_t limit = kDefaultSharedBytes;
  {
    std::lock_guard<std::mutex> lock(attributesMutex);
    auto it = sharedLimits.find(kernel);
    if (it != sharedLimits.end())
      limit = it->second;
  }
  if (shared > limit) {
    why = std::to_string(shared) + " bytes of dynamic shared memory (" +
          std::to_string(limit) + " allowed)";
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

/// Runs every block of a launch in turn on this thread; false (after
/// printing why) when one failed.
bool runGrid(dim3 grid, dim3 blockDims, size_t shared,
             const std::function<void()> &body) {
  const size_t threads = size_t(blockDims.x) * blockDims.y * blockDims.z;
  const unsigned warps = unsigned((threads + 31) / 32);
  while (stacks.size() < threads)
    stacks.push_back(std::make_unique<Stack>());
  std::unique_ptr<unsigned char[]> sharedBytes(new unsigned char[shared + 128]);
  unsigned char *alignedShared = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(sharedBytes.get()) + 127) & ~uintptr_t(127));

  Block b;
  b.body = &body;
  b.shared = alignedShared;
  b.sharedBytes = shared;
  b.exchange.assign(size_t(warps) * 32, 0);
  b.gather.assign(size_t(warps) * 32 * kGatherBytes, 0);
  b.fibers.resize(threads);
  Block *outer = activeBlock;
  activeBlock = &b;
  // Blocks run last to first: a device runs them in no set order, and the
  // usual accident (a block reading what a lower-numbered one writes in the
  // same launch) then reads stale data instead of passing.
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  for (uint64_t n = blocks; n-- > 0;) {
    const unsigned bx = unsigned(n % grid.x),
                   by = unsigned(n / grid.x % grid.y),
                   bz = unsigned(n / grid.x / grid.y);
    std::memset(alignedShared, 0xff, shared);
    size_t i = 0;
    for (unsigned tz = 0; tz < blockDims.z; ++tz)
      for (unsigned ty = 0; ty < blockDims.y; ++ty)
        for (unsigned tx = 0; tx < blockDims.x; ++tx, ++i) {
          Fiber &f = b.fibers[i];
          f.state = State::Runnable;
          f.predicate = 1;
          // A block's exited threads may leave copies in flight; they
          // land in a block that is gone.
          f.copies.clear();
          f.committedGroups = 0;
          f.position = {uint3{tx, ty, tz}, uint3{bx, by, bz}, blockDims, grid};
        }
    if (!runBlock(b, warps)) {
      std::fprintf(stderr, "emulator: kernel failed: %s\n", b.failure.c_str());
      activeBlock = outer;
      return false;
    }
  }
  activeBlock = outer;
  return true;
}

} // namespace

const ThreadPosition &emulator::position() { return block().current->position; }

unsigned char *emulator::dynamicShared() { return block().shared; }

std::string emulator::runningThread() {
  if (!activeBlock || !activeBlock->current)
    return "";
  const ThreadPosition &p = activeBlock->current->position;
  return " in block " + describe(p.block) + ", thread " + describe(p.thread);
}

uint64_t &emulator::exchangeSlot(int lane) {
  Block &b = block();
  const size_t warp = size_t(b.current - b.fibers.data()) / 32;
  return b.exchange[warp * 32 + size_t(lane)];
}

void emulator::gatherWarp(const void *mine, size_t bytes, void *all) {
  if (bytes > kGatherBytes)
    fail("gatherWarp of more than 32 bytes per lane");
  Block &b = block();
  const size_t thread = size_t(b.current - b.fibers.data());
  unsigned char *area = b.gather.data() + thread / 32 * 32 * kGatherBytes;
  std::memcpy(area + thread % 32 * kGatherBytes, mine, bytes);
  syncWarp();
  for (size_t lane = 0; lane < 32; ++lane)
    std::memcpy(static_cast<unsigned char *>(all) + lane * bytes,
                area + lane * kGatherBytes, bytes);
  syncWarp(); // nobody overwrites a slot before every lane has read
}

int emulator::syncThreads(int predicate) {
  Block &b = block();
  b.current->predicate = predicate;
  b.current->state = State::AtBlockBarrier;
  yieldToScheduler();
  return b.current->predicate;
}

void emulator::copyAsync(void *dst, const void *src, int bytes, bool valid) {
  Block &b = block();
  auto *to = static_cast<unsigned char *>(dst);
  if (to < b.shared || to + bytes > b.shared + b.sharedBytes)
    fail("cp.async to an address outside dynamic shared memory");
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(src) % bytes != 0)
    fail("cp.async with an address not aligned to its size");
  AsyncCopy copy{to, {}, bytes, b.current->committedGroups};
  if (valid)
    std::memcpy(copy.bytes, src, size_t(bytes));
  std::memset(to, 0xff, size_t(bytes));
  b.current->copies.push_back(copy);
}

void emulator::commitAsyncCopies() { ++block().current->committedGroups; }

void emulator::waitAsyncCopies(int pending) {
  Fiber &f = *block().current;
  // Groups [0, committedGroups - pending) must have landed.
  const uint64_t landed =
      f.committedGroups > uint64_t(pending) ? f.committedGroups - pending : 0;
  size_t kept = 0;
  for (AsyncCopy &copy : f.copies) {
    if (copy.group < landed)
      std::memcpy(copy.dst, copy.bytes, size_t(copy.size));
    else
      f.copies[kept++] = copy;
  }
  f.copies.resize(kept);
}

void emulator::syncWarp() {
  block().current->state = State::AtWarpBarrier;
  yieldToScheduler();
}

void emulator::fail(const char *message) {
  Block &b = block();
  const ThreadPosition &p = b.current->position;
  b.failure = std::string(message) + " in block " + describe(p.block) +
              ", thread " + describe(p.thread);
  yieldToScheduler();
  std::abort(); // never resumed
}

void emulator::launch(const void *kernel, dim3 grid, dim3 blockDims,
                      size_t shared, cudaStream_t stream,
                      std::function<void()> body) {
  std::string why;
  if (cudaError_t error =
          checkConfiguration(kernel, grid, blockDims, shared, why)) {
    std::fprintf(stderr, "emulator: launch rejected: %s\n", why.c_str());
    lastError = error;
    return;
  }
  count(Call::Launch);
  cudaError_t error =
      enqueue(stream, [grid, blockDims, shared, body = std::move(body)] {
        if (!runGrid(grid, blockDims, shared, body))
          failDevice(cudaErrorLaunchFailure);
      });
  if (error)
    lastError = error;
}

cudaError_t emulator::takeLastError() {
  if (cudaError_t sticky = deviceError())
    return sticky;
  cudaError_t error = lastError;
  lastError = cudaSuccess;
  return error;
}

cudaError_t emulator::peekLastError() {
  if (cudaError_t sticky = deviceError())
    return sticky;
  return lastError;
}

void emulator::setSharedLimit(const void *kernel, size_t bytes) {
  std::lock_guard<std::mutex> lock(attributesMutex);
  sharedLimits[kernel] = bytes;
}

size_t emulator::optInSharedBytes() { return kOptInSharedBytes; }

// ProgramPrelude.h's LoomEmulatorPosition: four triples of unsigned.
static_assert(sizeof(ThreadPosition) == 12 * sizeof(unsigned) &&
                  offsetof(ThreadPosition, gridSize) == 9 * sizeof(unsigned),
              "ThreadPosition is four packed triples");

const void *emulator::positionAddress() { return &position(); }
