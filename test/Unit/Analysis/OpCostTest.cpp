// The cost model's first layer: FLOPs and bytes of ops read off their factor
// rules, against counts worked out by hand.

#include "loom/Analysis/OpCost.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {
class OpCostTest : public ::testing::Test {
protected:
  OpCostTest() { context.loadDialect<LoomDialect, func::FuncDialect>(); }

  func::FuncOp parse(const char *source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    func::FuncOp func;
    module->walk([&](func::FuncOp f) { func = f; });
    return func;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(OpCostTest, MatmulIsTwoFlopsPerMultiplyAdd) {
  func::FuncOp func = parse(R"mlir(
    func.func @f(%a: tensor<8x512xf32>, %b: tensor<512x64xbf16>) -> tensor<8x64xf32> {
      %c = loom.cast %b : tensor<512x64xbf16> -> tensor<512x64xf32>
      %0 = loom.matmul %a, %c : (tensor<8x512xf32>, tensor<512x64xf32>) -> tensor<8x64xf32>
      return %0 : tensor<8x64xf32>
    })mlir");
  ASSERT_TRUE(func);
  Operation *matmul = nullptr;
  func.walk([&](MatmulOp op) { matmul = op; });
  OpCost cost = estimateOpCost(matmul);
  EXPECT_EQ(cost.matmulFlops, 2.0 * 8 * 512 * 64);
  EXPECT_EQ(cost.otherFlops, 0.0);
  EXPECT_EQ(cost.bytesRead, 4.0 * (8 * 512 + 512 * 64));
  EXPECT_EQ(cost.bytesWritten, 4.0 * 8 * 64);

  // The cast: one FLOP per element, bf16 in, f32 out.
  OpCost total = estimateFunctionCost(func);
  EXPECT_EQ(total.matmulFlops, 2.0 * 8 * 512 * 64);
  EXPECT_EQ(total.otherFlops, 512.0 * 64);
  EXPECT_EQ(total.bytesRead, 4.0 * (8 * 512 + 512 * 64) + 2.0 * 512 * 64);
  EXPECT_EQ(total.opsWithoutRule, 0);
}

TEST_F(OpCostTest, BatchedMatmulAndReductions) {
  func::FuncOp func = parse(R"mlir(
    func.func @f(%a: tensor<4x16x32xf32>, %b: tensor<4x32x8xf32>) -> tensor<4x8xf32> {
      %0 = loom.matmul %a, %b : (tensor<4x16x32xf32>, tensor<4x32x8xf32>) -> tensor<4x16x8xf32>
      %1 = loom.reduce_sum %0 [1] : tensor<4x16x8xf32> -> tensor<4x8xf32>
      return %1 : tensor<4x8xf32>
    })mlir");
  ASSERT_TRUE(func);
  OpCost total = estimateFunctionCost(func);
  EXPECT_EQ(total.matmulFlops, 2.0 * 4 * 16 * 8 * 32);
  // The reduction visits every input element once.
  EXPECT_EQ(total.otherFlops, 4.0 * 16 * 8);
  EXPECT_EQ(total.flops(), total.matmulFlops + total.otherFlops);
}

TEST_F(OpCostTest, EmbeddingsIndexAndDoNotMultiply) {
  // An embedding lookup of 128 rows of a [8192, 256] table, and its
  // gradient: no GEMM FLOPs (the table's rows are a contracting factor for
  // sharding only). The lookup reads the rows it picks and the indices;
  // the gradient adds each update once and writes the table.
  func::FuncOp func = parse(R"mlir(
    func.func @f(%table: tensor<8192x256xf32>, %ids: tensor<128xi64>, %g: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<8192x256xf32>) {
      %0 = loom.gather %table[%ids] : (tensor<8192x256xf32>, tensor<128xi64>) -> tensor<128x256xf32>
      %1 = loom.scatter_add %g[%ids] : (tensor<128x256xf32>, tensor<128xi64>) -> tensor<8192x256xf32>
      return %0, %1 : tensor<128x256xf32>, tensor<8192x256xf32>
    })mlir");
  ASSERT_TRUE(func);
  Operation *gather = nullptr, *scatter = nullptr;
  func.walk([&](GatherOp op) { gather = op; });
  func.walk([&](ScatterAddOp op) { scatter = op; });
  OpCost lookup = estimateOpCost(gather);
  EXPECT_EQ(lookup.flops(), 0.0);
  EXPECT_EQ(lookup.bytesRead, 8.0 * 128 + 4.0 * 128 * 256);
  EXPECT_EQ(lookup.bytesWritten, 4.0 * 128 * 256);
  OpCost gradient = estimateOpCost(scatter);
  EXPECT_EQ(gradient.matmulFlops, 0.0);
  EXPECT_EQ(gradient.otherFlops, 128.0 * 256);
  EXPECT_EQ(gradient.bytesRead, 4.0 * 128 * 256 + 8.0 * 128);
  EXPECT_EQ(gradient.bytesWritten, 4.0 * 8192 * 256);
}
