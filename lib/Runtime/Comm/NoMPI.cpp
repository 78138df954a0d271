//===- NoMPI.cpp - The MPI engine where MPI is missing --------------------===//
//
// Linked when CMake finds no MPI: multi-process runs report why they cannot
// start instead of failing to link.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

using namespace loomrt;

bool loomrt::haveMPI() { return false; }

StatusOr<std::shared_ptr<Communicator>>
loomrt::createMPICommunicator(const CommOptions &) {
  return Status::error("this runtime was built without MPI (install "
                       "libopenmpi-dev and reconfigure)");
}
