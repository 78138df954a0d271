//===- NoNCCL.cpp - The NCCL engine where CUDA or NCCL is missing ---------===//
//
// Linked when CMake finds no CUDA toolkit with NCCL (or LOOM_ENABLE_CUDA is
// off): multi-GPU runs report why they cannot start instead of failing to
// link.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

using namespace loomrt;

bool loomrt::haveNCCL() { return false; }

StatusOr<std::shared_ptr<Communicator>>
loomrt::createNCCLCommunicator(const CommOptions &) {
  return Status::error("this runtime was built without NCCL (configure it "
                       "where the CUDA toolkit and NCCL are installed, with "
                       "LOOM_ENABLE_CUDA on)");
}
