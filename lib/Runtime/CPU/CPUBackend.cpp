//===- CPUBackend.cpp - Kernels on the host
//--------------------------------===//
//
// The arena is one anonymous mapping, never touched by the backend itself
// except to copy inputs in and outputs out. That makes the peak memory of a
// step measurable independently of the plan: the pages the kernels touched
// are exactly the resident pages of the mapping (mincore), which must match
// the arena size the compiler planned.
//
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "loom/Runtime/Communicator.h"
#include "loom/Runtime/Kernels.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace loomrt;

namespace {

size_t pageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

class CPUBackend : public Backend {
public:
  ~CPUBackend() override {
    if (arena_)
      munmap(arena_, arenaMapped_);
    for (void *block : blocks_)
      std::free(block);
  }

  const char *name() const override { return "CPU"; }

  Status prepare(size_t index, const Instruction &instruction) override {
    const KernelInfo *info = lookupCPUKernel(instruction.kernel);
    if (!info)
      return Status::error("the CPU backend has no kernel '" +
                           instruction.kernel + "'");
    if (kernels_.size() <= index)
      kernels_.resize(index + 1, nullptr);
    kernels_[index] = info;
    return info->check(instruction);
  }

  StatusOr<uint8_t *> allocateArena(uint64_t bytes) override {
    size_t page = pageSize();
    size_t mapped = std::max<size_t>(page, (bytes + page - 1) / page * page);
    void *arena = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
      return Status::error("cannot map an arena of " + std::to_string(bytes) +
                           " bytes: " + std::strerror(errno));
    // Huge pages would make residency coarser than the plan's buffers.
    madvise(arena, mapped, MADV_NOHUGEPAGE);
    arena_ = static_cast<uint8_t *>(arena);
    arenaMapped_ = mapped;
    return arena_;
  }

  StatusOr<uint8_t *> allocate(uint64_t bytes) override {
    void *block = std::aligned_alloc(64, size_t((bytes + 63) / 64 * 64));
    if (!block)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes");
    blocks_.push_back(block);
    return static_cast<uint8_t *>(block);
  }

  bool addressesHostMemory() const override { return true; }

  Status upload(void *destination, const void *source,
                uint64_t bytes) override {
    std::memcpy(destination, source, bytes);
    return Status::ok();
  }

  Status download(void *destination, const void *source,
                  uint64_t bytes) override {
    std::memcpy(destination, source, bytes);
    return Status::ok();
  }

  Status copy(void *destination, const void *source, uint64_t bytes) override {
    std::memmove(destination, source, bytes);
    return Status::ok();
  }

  Status launch(size_t index, const Instruction &instruction,
                const void *const *inputs, void *const *outputs) override {
    using Clock = std::chrono::steady_clock;
    auto before = times_.empty() ? Clock::time_point() : Clock::now();
    std::string error;
    KernelArgs args{instruction, inputs, outputs, &error};
    kernels_[index]->run(args);
    if (!times_.empty())
      times_[index] =
          std::chrono::duration<double>(Clock::now() - before).count();
    return error.empty() ? Status::ok() : Status::error(error);
  }

  Status synchronize(size_t &) override { return Status::ok(); }

  // Host memory: collectives read and write it when they are posted.
  void orderCommunication(Communicator &) override {}
  bool waitOnDevice(CommEvent &) override { return false; }

  void startProfile(size_t instructions) override {
    times_.assign(instructions, 0.0);
  }
  std::vector<double> instructionSeconds() override {
    std::vector<double> times = std::move(times_);
    times_.clear();
    return times;
  }

  uint64_t measureArena() override {
    size_t page = pageSize();
    std::vector<unsigned char> resident(arenaMapped_ / page);
    if (mincore(arena_, arenaMapped_, resident.data()) != 0)
      return 0;
    uint64_t bytes = 0;
    for (unsigned char flags : resident)
      if (flags & 1)
        bytes += page;
    return bytes;
  }

private:
  uint8_t *arena_ = nullptr;
  size_t arenaMapped_ = 0;
  std::vector<void *> blocks_;
  std::vector<const KernelInfo *> kernels_;
  std::vector<double> times_;
};

} // namespace

Backend::~Backend() = default;

std::unique_ptr<Backend> loomrt::createCPUBackend() {
  return std::make_unique<CPUBackend>();
}
