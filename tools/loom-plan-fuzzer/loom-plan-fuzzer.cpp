//===- loom-plan-fuzzer.cpp - libFuzzer target for the runtime's readers --===//
//
// Feeds arbitrary bytes to every reader of untrusted runtime input: the plan
// parser, the .npy parser and the TensorProto decoder. Any crash, sanitizer
// report, hang or huge allocation is a bug; errors are expected. A plan that
// parses must also survive a write/parse round trip unchanged.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace loomrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  StatusOr<Plan> plan = parsePlan(bytes, "fuzz.lp");
  if (plan.isOk()) {
    // Whatever parses, the writer can write and the parser reads back.
    std::string text = writePlan(*plan);
    StatusOr<Plan> again = parsePlan(text, "fuzz.lp");
    if (!again.isOk() || writePlan(*again) != text)
      std::abort();
  }
  (void)parseNpy(bytes);
  (void)parseTensorProto(bytes);
  return 0;
}
