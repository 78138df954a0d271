//===- NoMPI.cpp - The MPI engine where MPI is missing --------------------===//
//
// Linked when CMake finds no MPI: multi-process runs report why they cannot
// start instead of failing to link.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

using namespace loom::runtime;

bool loom::runtime::haveMPI() { return false; }

StatusOr<std::shared_ptr<Communicator>>
loom::runtime::createMPICommunicator(const CommOptions &) {
  return Status::error("this runtime was built without MPI (install "
                       "libopenmpi-dev and reconfigure)");
}
