//===- Scratch.cpp - Per-thread scratch memory for CPU kernels ------------===//

#include "Scratch.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

using namespace loomrt::cpu;

namespace {

struct Buffer {
  void *data = nullptr;
  size_t bytes = 0;
};

/// One thread's buffers, in the order its kernels take them.
struct Pool {
  std::vector<Buffer> buffers;
  size_t taken = 0;
  ~Pool() {
    for (Buffer &buffer : buffers)
      std::free(buffer.data);
  }
};

thread_local Pool pool;

constexpr size_t kAlignment = 64;

} // namespace

ScratchScope::ScratchScope() : first_(pool.taken) {}

ScratchScope::~ScratchScope() {
  // What the thread keeps: the buffers up to this scope's first, then this
  // scope's while they fit.
  size_t kept = 0;
  for (size_t k = 0; k < pool.buffers.size(); ++k) {
    Buffer &buffer = pool.buffers[k];
    kept += buffer.bytes;
    if (k >= first_ && kept > kScratchKeptBytes) {
      kept -= buffer.bytes;
      std::free(buffer.data);
      buffer = Buffer();
    }
  }
  pool.taken = first_;
}

void *ScratchScope::takeBytes(size_t bytes) {
  if (pool.taken == pool.buffers.size())
    pool.buffers.emplace_back();
  Buffer &buffer = pool.buffers[pool.taken++];
  if (buffer.bytes < bytes) {
    std::free(buffer.data);
    size_t rounded =
        std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
    buffer.data = std::aligned_alloc(kAlignment, rounded);
    if (!buffer.data) {
      buffer.bytes = 0;
      throw std::bad_alloc();
    }
    buffer.bytes = rounded;
  }
  return buffer.data;
}
