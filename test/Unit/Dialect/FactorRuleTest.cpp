// FactorRule::verify guards every op's rule against its types; broken rules
// cannot be written in verified IR, so its error paths are exercised here.

#include "loom/Dialect/Loom/IR/FactorRule.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {
class FactorRuleTest : public ::testing::Test {
protected:
  FactorRuleTest() {
    context.loadDialect<LoomDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(R"mlir(
      func.func @f(%a: tensor<8x512xf32>, %b: tensor<512x64xf32>) -> tensor<8x64xf32> {
        %0 = loom.matmul %a, %b : (tensor<8x512xf32>, tensor<512x64xf32>) -> tensor<8x64xf32>
        return %0 : tensor<8x64xf32>
      })mlir",
                                         &context);
    module->walk([&](MatmulOp op) { matmul = op; });
  }

  /// Verifies `rule` against the matmul and returns the error, if any.
  std::string verifyError(const FactorRule &rule) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    if (succeeded(rule.verify(matmul)))
      return "";
    return message;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  MatmulOp matmul;
};
} // namespace

TEST_F(FactorRuleTest, MatmulRuleVerifies) {
  ASSERT_TRUE(matmul);
  FactorRule rule = matmul.getFactorRule();
  EXPECT_EQ(verifyError(rule), "");
  ASSERT_EQ(rule.getFactors().size(), 3u);
  EXPECT_EQ(rule.getFactors()[2].kind, FactorKind::Contracting);
  EXPECT_EQ(rule.getFactors()[2].size, 512);
  SmallVector<AffineMap> maps = rule.getIndexingMaps(&context);
  ASSERT_EQ(maps.size(), 3u);
  std::string text;
  llvm::raw_string_ostream os(text);
  maps[1].print(os);
  EXPECT_EQ(text, "(d0, d1, d2) -> (d2, d1)");
}

TEST_F(FactorRuleTest, WrongTensorCount) {
  FactorRule rule;
  unsigned m = rule.addFactor(8, FactorKind::Parallel);
  rule.addOperand({{m}, {m}});
  EXPECT_EQ(verifyError(rule),
            "'loom.matmul' op factor rule describes 1 "
            "operand(s) and 0 result(s), the op has 2 and 1");
}

TEST_F(FactorRuleTest, WrongRank) {
  FactorRule rule;
  unsigned m = rule.addFactor(8, FactorKind::Parallel);
  rule.addOperand({{m}});
  rule.addOperand({{m}, {m}});
  rule.addResult({{m}, {m}});
  EXPECT_EQ(verifyError(rule),
            "'loom.matmul' op factor rule gives 1 dimension(s) for operand #0 "
            "of type 'tensor<8x512xf32>'");
}

TEST_F(FactorRuleTest, SizesMustMultiplyOut) {
  FactorRule rule;
  unsigned m = rule.addFactor(8, FactorKind::Parallel);
  unsigned n = rule.addFactor(64, FactorKind::Parallel);
  unsigned k = rule.addFactor(256, FactorKind::Contracting); // Not 512.
  rule.addOperand({{m}, {k}});
  rule.addOperand({{k}, {n}});
  rule.addResult({{m}, {n}});
  EXPECT_EQ(verifyError(rule), "'loom.matmul' op factor rule maps dimension 1 "
                               "of operand #0 (size 512) to factors of total "
                               "size 256");
}

TEST_F(FactorRuleTest, UnusedFactor) {
  FactorRule rule = matmul.getFactorRule();
  rule.addFactor(2, FactorKind::Parallel);
  EXPECT_EQ(verifyError(rule),
            "'loom.matmul' op factor rule has unused factor d3");
}

TEST_F(FactorRuleTest, UnknownFactor) {
  FactorRule rule;
  unsigned m = rule.addFactor(8, FactorKind::Parallel);
  rule.addOperand({{m}, {7}});
  rule.addOperand({{m}, {m}});
  rule.addResult({{m}, {m}});
  EXPECT_EQ(verifyError(rule),
            "'loom.matmul' op factor rule uses unknown factor d7");
}
