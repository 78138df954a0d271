//===- NoCUDA.cpp - The CUDA backend's entry points without CUDA ----------===//
//
// Built when the runtime is configured without the CUDA toolkit
// (LOOM_ENABLE_CUDA=OFF): every entry point says so.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "loom/Runtime/Communicator.h"

using namespace loomrt;

namespace {
const char *kNoCUDA = "this runtime was built without the CUDA backend "
                      "(configure with the CUDA toolkit, LOOM_ENABLE_CUDA)";
} // namespace

bool loomrt::haveCUDA() { return false; }

int loomrt::cudaDeviceCount(std::string *why) {
  if (why)
    *why = kNoCUDA;
  return 0;
}

std::vector<std::string> loomrt::describeCUDADevices() { return {}; }

StatusOr<std::unique_ptr<Backend>>
loomrt::createCUDABackend(const ExecutorOptions &) {
  return Status::error(kNoCUDA);
}

StatusOr<std::shared_ptr<Communicator>>
loomrt::wrapForDevice(std::shared_ptr<Communicator>, int) {
  return Status::error(kNoCUDA);
}
