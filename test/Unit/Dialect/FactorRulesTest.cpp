// Every graph op of the loom dialect states its sharding rule: it implements
// FactorRuleOpInterface, unless it is a kernel-level op (KernelOpTrait, the
// ops of LoomKernelOps.td that only exist after fusion) or opts out with
// NoFactorRule (symbols that compute nothing on tensors, the reason in their
// description). docs/design/dialect.md promises it; this test keeps it true
// for every op added later. test/Dialect/Loom/test-print-factors.mlir pins
// what the rules say.

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The ops the loom dialect registers.
std::vector<RegisteredOperationName> loomOps(MLIRContext &context) {
  context.getOrLoadDialect<LoomDialect>();
  std::vector<RegisteredOperationName> ops;
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.getDialectNamespace() == LoomDialect::getDialectNamespace())
      ops.push_back(name);
  return ops;
}

std::string joinNames(const std::vector<std::string> &names) {
  return llvm::join(names, ", ");
}

} // namespace

TEST(FactorRulesTest, EveryGraphOpHasAFactorRule) {
  MLIRContext context;
  std::vector<std::string> missing;
  unsigned graphOps = 0;
  for (RegisteredOperationName name : loomOps(context)) {
    if (name.hasTrait<KernelOpTrait>() || name.hasTrait<NoFactorRule>())
      continue;
    ++graphOps;
    if (!name.hasInterface<FactorRuleOpInterface>())
      missing.push_back(name.getStringRef().str());
  }
  EXPECT_GT(graphOps, 0u) << "the loom dialect registered no graph op";
  EXPECT_TRUE(missing.empty())
      << "graph ops of the loom dialect without a factor rule "
         "(FactorRuleOpInterface), "
      << missing.size() << " of " << graphOps << ": " << joinNames(missing)
      << ". Give each one a rule (lib/Dialect/Loom/IR/FactorRules.cpp, "
         "pinned in test/Dialect/Loom/test-print-factors.mlir); an op that "
         "only exists after fusion belongs in LoomKernelOps.td "
         "(KernelOpTrait), and one that computes nothing on tensors may "
         "declare NoFactorRule, saying why in its description.";
}

TEST(FactorRulesTest, OptOutsAreConsistent) {
  // NoFactorRule on an op that has a rule, or on a kernel op (which needs
  // none anyway), would make the trait say something false.
  MLIRContext context;
  std::vector<std::string> contradictory;
  for (RegisteredOperationName name : loomOps(context)) {
    if (!name.hasTrait<NoFactorRule>())
      continue;
    if (name.hasInterface<FactorRuleOpInterface>() ||
        name.hasTrait<KernelOpTrait>())
      contradictory.push_back(name.getStringRef().str());
  }
  EXPECT_TRUE(contradictory.empty())
      << "ops marked NoFactorRule that have a factor rule or are kernel ops: "
      << joinNames(contradictory);
}

TEST(FactorRulesTest, KernelOpsAreMarked) {
  // The ops made by loom-lower-to-plan's fusion passes are the kernel ops;
  // the graph ops they are made from are not.
  MLIRContext context;
  context.getOrLoadDialect<LoomDialect>();
  auto isKernel = [&](StringRef op) {
    std::optional<RegisteredOperationName> name =
        RegisteredOperationName::lookup(op, &context);
    return name && name->hasTrait<KernelOpTrait>();
  };
  for (StringRef op :
       {"loom.fused_matmul", "loom.matmul_bias_grad", "loom.matmul_gelu_grad",
        "loom.fused_layer_norm_grad", "loom.cross_entropy_with_grad",
        "loom.packed_attention", "loom.packed_attention_grad", "loom.fusion",
        "loom.yield"})
    EXPECT_TRUE(isKernel(op)) << op.str();
  for (StringRef op : {"loom.matmul", "loom.attention", "loom.layer_norm_grad",
                       "loom.cross_entropy_grad", "loom.gelu_grad",
                       "loom.sgd_update", "loom.all_reduce", "loom.assign"})
    EXPECT_FALSE(isKernel(op)) << op.str();
}
