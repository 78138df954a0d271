//===- RuntimeAPI.cpp - The CUDA runtime API calls the kernels make -------===//
//
// The subset of the CUDA runtime API that the CUDA backend and its tests use,
// on host memory: one device with an H200's properties (so that launch
// geometry is what the GPU gets), its allocations, and copies and memsets
// that go through the streams of Streams.cpp. Copies check their pointers
// against the kind they name and against the bounds of the device blocks.
// Linked into the emulator's programs instead of libcudart, whose
// definitions these take the place of.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

using namespace loomrt::cuda;

namespace {
/// What an H200 reports.
constexpr int kComputeMajor = 9, kComputeMinor = 0;
constexpr int kMultiprocessors = 132;
/// Pinned host memory as cudaMallocHost gives it: aligned like device
/// memory, and filled like fresh device blocks (DeviceMemory.cpp) since its
/// contents are undefined too.
constexpr size_t kAllocationAlignment = 256;
constexpr int kFreshByte = 0xff;
/// An H200's memory, as cudaMemGetInfo reports it.
constexpr size_t kDeviceBytes = size_t(143771) << 20;

/// The blocks cudaMalloc and cudaMallocHost handed out (by start address),
/// so that copies can tell device from pinned and pageable memory and
/// reject ranges that are only partly device memory.
struct Memory {
  std::mutex mutex;
  std::map<const void *, size_t> device, pinned;
  size_t inUse = 0;
};

/// Never destroyed: programs may free memory from static destructors.
Memory &memory() {
  static Memory *m = new Memory;
  return *m;
}

void *allocateHost(size_t bytes) {
  const size_t rounded = (bytes + kAllocationAlignment - 1) /
                         kAllocationAlignment * kAllocationAlignment;
  void *pointer = std::aligned_alloc(kAllocationAlignment,
                                     rounded ? rounded : kAllocationAlignment);
  if (pointer)
    std::memset(pointer, kFreshByte, rounded);
  return pointer;
}

enum class Space { Device, PartlyDevice, Pinned, Pageable };

enum class Overlap { Inside, Partly, Outside };

/// Where [p, p + bytes) lies: inside one of `blocks`, partly in some, or
/// outside all.
Overlap overlap(const std::map<const void *, size_t> &blocks, const void *p,
                size_t bytes) {
  const auto *begin = static_cast<const unsigned char *>(p);
  auto it = blocks.upper_bound(p);
  if (it != blocks.begin()) {
    auto block = std::prev(it);
    const auto *start = static_cast<const unsigned char *>(block->first);
    if (begin < start + block->second)
      return begin + bytes <= start + block->second ? Overlap::Inside
                                                    : Overlap::Partly;
  }
  if (it != blocks.end() &&
      static_cast<const unsigned char *>(it->first) < begin + bytes)
    return Overlap::Partly;
  return Overlap::Outside;
}

Space space(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  switch (overlap(memory().device, p, bytes)) {
  case Overlap::Inside:
    return Space::Device;
  case Overlap::Partly:
    return Space::PartlyDevice;
  case Overlap::Outside:
    break;
  }
  return overlap(memory().pinned, p, bytes) == Overlap::Inside
             ? Space::Pinned
             : Space::Pageable;
}

/// Whether a copy's kind names the spaces its pointers are in.
bool matches(cudaMemcpyKind kind, Space from, Space to) {
  const bool fromDevice = from == Space::Device, toDevice = to == Space::Device;
  switch (kind) {
  case cudaMemcpyHostToHost:
    return !fromDevice && !toDevice;
  case cudaMemcpyHostToDevice:
    return !fromDevice && toDevice;
  case cudaMemcpyDeviceToHost:
    return fromDevice && !toDevice;
  case cudaMemcpyDeviceToDevice:
    return fromDevice && toDevice;
  case cudaMemcpyDefault:
    return true;
  }
  return false;
}
} // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *properties, int device) {
  if (device != 0)
    return cudaErrorInvalidDevice;
  std::memset(properties, 0, sizeof *properties);
  std::strcpy(properties->name, "Loom host emulator (H200-shaped)");
  properties->major = kComputeMajor;
  properties->minor = kComputeMinor;
  properties->multiProcessorCount = kMultiprocessors;
  properties->warpSize = 32;
  properties->maxThreadsPerBlock = 1024;
  properties->sharedMemPerBlockOptin = emulator::optInSharedBytes();
  properties->totalGlobalMem = kDeviceBytes;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute,
                                   int device) {
  if (device != 0)
    return cudaErrorInvalidDevice;
  switch (attribute) {
  case cudaDevAttrComputeCapabilityMajor:
    *value = kComputeMajor;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = kComputeMinor;
    return cudaSuccess;
  case cudaDevAttrMultiProcessorCount:
    *value = kMultiprocessors;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = int(emulator::optInSharedBytes());
    return cudaSuccess;
  default:
    return cudaErrorNotSupported;
  }
}

cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  emulator::count(emulator::Call::Malloc);
  *pointer = emulator::allocateDeviceBlock(bytes);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().device[*pointer] = bytes;
  memory().inUse += bytes;
  return cudaSuccess;
}

// Both free calls wait for the device to be idle, as a device's do.
cudaError_t cudaFree(void *pointer) {
  if (!pointer)
    return cudaSuccess;
  emulator::count(emulator::Call::Free);
  emulator::synchronizeDevice();
  std::lock_guard<std::mutex> lock(memory().mutex);
  auto it = memory().device.find(pointer);
  if (it == memory().device.end())
    return cudaErrorInvalidValue;
  memory().inUse -= it->second;
  memory().device.erase(it);
  emulator::freeDeviceBlock(pointer);
  return cudaSuccess;
}

// cuda_runtime.h's typed cudaMallocHost calls cudaHostAlloc.
cudaError_t cudaHostAlloc(void **pointer, size_t bytes, unsigned int) {
  emulator::count(emulator::Call::Malloc);
  *pointer = allocateHost(bytes);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().pinned[*pointer] = bytes;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  return cudaHostAlloc(pointer, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *pointer) {
  if (!pointer)
    return cudaSuccess;
  emulator::count(emulator::Call::Free);
  emulator::synchronizeDevice();
  std::lock_guard<std::mutex> lock(memory().mutex);
  if (!memory().pinned.erase(pointer))
    return cudaErrorInvalidValue;
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  *total = kDeviceBytes;
  *free = kDeviceBytes > memory().inUse ? kDeviceBytes - memory().inUse : 0;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0)
    return cudaSuccess;
  const Space to = space(dst, bytes), from = space(src, bytes);
  if (to == Space::PartlyDevice || from == Space::PartlyDevice ||
      !matches(kind, from, to))
    return cudaErrorInvalidValue;
  emulator::count(to != Space::Device     ? emulator::Call::CopyToHost
                  : from != Space::Device ? emulator::Call::CopyToDevice
                                          : emulator::Call::CopyOnDevice);
  if (from != Space::Device && to != Space::Device) {
    // Host to host: synchronous with respect to the host.
    if (cudaError_t error = emulator::synchronizeStream(stream))
      return error;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (from == Space::Pageable) {
    // The source is staged before the call returns: the caller may reuse it.
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char *>(src),
        static_cast<const unsigned char *>(src) + bytes);
    return emulator::enqueue(stream, [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
    });
  }
  // Everything else is read when the copy runs, even into pageable memory
  // (which a device may or may not copy before returning).
  return emulator::enqueue(stream, [=] { std::memmove(dst, src, bytes); });
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t stream) {
  if (bytes == 0)
    return cudaSuccess;
  if (space(pointer, bytes) != Space::Device)
    return cudaErrorInvalidValue;
  emulator::count(emulator::Call::Memset);
  return emulator::enqueue(stream, [=] { std::memset(pointer, value, bytes); });
}

cudaError_t cudaMemset(void *pointer, int value, size_t bytes) {
  return cudaMemsetAsync(pointer, value, bytes, nullptr);
}

cudaError_t cudaGetLastError() { return emulator::takeLastError(); }
cudaError_t cudaPeekAtLastError() { return emulator::peekLastError(); }

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  case cudaErrorNotSupported:
    return "cudaErrorNotSupported";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  default:
    return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidConfiguration:
    return "invalid launch configuration (emulator)";
  case cudaErrorLaunchFailure:
    return "the kernel failed in the emulator (see its report on stderr)";
  case cudaErrorInvalidValue:
    return "invalid argument (emulator: a copy's pointers outside the device "
           "blocks or not of the kind it names?)";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle (emulator: an unknown stream or event)";
  case cudaErrorNotReady:
    return "device not ready";
  default:
    return "error in the CUDA emulator";
  }
}

cudaError_t cudaFuncSetAttribute(const void *kernel,
                                 cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaErrorNotSupported;
  if (value < 0 || size_t(value) > emulator::optInSharedBytes())
    return cudaErrorInvalidValue;
  emulator::setSharedLimit(kernel, size_t(value));
  return cudaSuccess;
}

} // extern "C"
