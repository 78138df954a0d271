//===- RuntimeAPI.cpp - The CUDA runtime API calls the kernels make -------===//
//
// The subset of the CUDA runtime API that the kernels and their tests use, on
// host memory: one device, an H200's properties (so that launch geometry is
// what the GPU gets), synchronous streams. Linked into the emulator's programs
// instead of libcudart, whose definitions these take the place of.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

using namespace loom::runtime::cuda;

namespace {
/// What an H200 reports.
constexpr int kComputeMajor = 9, kComputeMinor = 0;
constexpr int kMultiprocessors = 132;
/// Device memory: cudaMalloc's alignment, and the byte fresh allocations are
/// filled with (a device's are undefined; 0xff is NaN for every float type).
constexpr size_t kAllocationAlignment = 256;
constexpr int kFreshByte = 0xff;
int streamTag;
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

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  *stream = reinterpret_cast<cudaStream_t>(&streamTag);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
// Launches and copies complete before they return.
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  const size_t rounded = (bytes + kAllocationAlignment - 1) /
                         kAllocationAlignment * kAllocationAlignment;
  *pointer = std::aligned_alloc(kAllocationAlignment,
                                rounded ? rounded : kAllocationAlignment);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  std::memset(*pointer, kFreshByte, rounded);
  return cudaSuccess;
}

cudaError_t cudaFree(void *pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *pointer, int value, size_t bytes) {
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t) {
  return cudaMemset(pointer, value, bytes);
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
