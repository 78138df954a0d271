//===- TestPasses.h - Loom's test-only passes -------------------*- C++ -*-===//
//
// Passes that exist for lit tests only (upstream's test/lib convention):
// loom-opt registers them, no pipeline uses them, and the pass reference
// does not list them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_LIB_TRANSFORMS_TESTPASSES_H
#define LOOM_TEST_LIB_TRANSFORMS_TESTPASSES_H

namespace mlir {
namespace loom {
namespace test {

/// `loom-test-print-factors`: every op's factor rule as a remark.
void registerTestPrintFactorsPass();

/// Every test pass.
inline void registerTestPasses() { registerTestPrintFactorsPass(); }

} // namespace test
} // namespace loom
} // namespace mlir

#endif // LOOM_TEST_LIB_TRANSFORMS_TESTPASSES_H
