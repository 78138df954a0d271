//===- DeviceMemory.cpp - Device blocks between guard pages ---------------===//
//
// Each cudaMalloc block is mapped on its own pages, ending where its last
// page ends, with an inaccessible page on either side. A kernel that runs
// past the end of a block (by more than the block's rounding up to 256
// bytes), or before its start by more than the rest of its first page,
// faults at once, and the SIGSEGV handler names the block and the kernel
// thread instead of letting the access land in another tensor. On a device such
// an access corrupts a neighbour or stops the context with an illegal address,
// far from its cause.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

using namespace loomrt::cuda;

namespace {

/// cudaMalloc's alignment, and the byte fresh blocks are filled with (a
/// device's are undefined; 0xff is NaN for every float type).
constexpr size_t kAlignment = 256;
constexpr int kFreshByte = 0xff;

struct Mapping {
  unsigned char *base = nullptr;
  size_t total = 0, bytes = 0;
};

/// The mappings by block address. Read without the lock by the fault
/// handler, which then aborts.
std::mutex mappingsMutex;
std::map<const void *, Mapping> *mappings = new std::map<const void *, Mapping>;

size_t pageBytes() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void onFault(int signal, siginfo_t *info, void *) {
  const auto *address = static_cast<const unsigned char *>(info->si_addr);
  const size_t page = pageBytes();
  for (const auto &[block, m] : *mappings) {
    const auto *start = static_cast<const unsigned char *>(block);
    const unsigned char *end = m.base + m.total - page;
    std::string where;
    if (address >= m.base && address < m.base + page)
      where = std::to_string(start - address) + " bytes before";
    else if (address >= end && address < m.base + m.total)
      where =
          std::to_string(address - start - m.bytes) + " bytes past the end of";
    else
      continue;
    std::fprintf(stderr,
                 "emulator: out-of-bounds access to device memory: %s the "
                 "%zu-byte block at %p%s\n",
                 where.c_str(), m.bytes, block,
                 emulator::runningThread().c_str());
    std::abort();
  }
  // Not a guard page: the default action.
  ::signal(signal, SIG_DFL);
}

void installFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, nullptr);
  });
}

} // namespace

void *emulator::allocateDeviceBlock(size_t bytes) {
  installFaultHandler();
  const size_t page = pageBytes();
  const size_t rounded = roundUp(bytes ? bytes : 1, kAlignment);
  const size_t data = roundUp(rounded, page), total = data + 2 * page;
  auto *base = static_cast<unsigned char *>(
      mmap(nullptr, total, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (base == MAP_FAILED)
    return nullptr;
  if (mprotect(base + page, data, PROT_READ | PROT_WRITE) != 0) {
    munmap(base, total);
    return nullptr;
  }
  unsigned char *block = base + page + data - rounded;
  std::memset(block, kFreshByte, rounded);
  std::lock_guard<std::mutex> lock(mappingsMutex);
  (*mappings)[block] = Mapping{base, total, bytes};
  return block;
}

void emulator::freeDeviceBlock(void *block) {
  std::lock_guard<std::mutex> lock(mappingsMutex);
  auto it = mappings->find(block);
  if (it == mappings->end())
    return;
  munmap(it->second.base, it->second.total);
  mappings->erase(it);
}
