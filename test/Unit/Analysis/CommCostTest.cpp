// The link model (bytes a ring sends, latency steps, time) against counts
// worked out by hand, and its reading of the loom collectives.

#include "loom/Analysis/CommCost.h"
#include "loom/Analysis/LinkModel.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;
using loomcost::CollectiveKind;

TEST(LinkModelTest, RingBytesPerRank) {
  // 1 MiB over 4 ranks: an all_reduce sends 2 * 3/4 of it, the others 3/4.
  uint64_t s = 1 << 20;
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::AllReduce, s, 4),
            s * 3 / 2);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::AllGather, s, 4),
            s * 3 / 4);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::ReduceScatter, s, 4),
            s * 3 / 4);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::AllToAll, s, 4), s * 3 / 4);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::Broadcast, s, 4),
            s * 3 / 4);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::Send, s, 2), s);
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::Recv, s, 2), 0u);
  // Two ranks: an all_reduce sends the whole buffer once.
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::AllReduce, 1024, 2), 1024u);
  // Whole bytes, rounded down: 2 * 2/3 of 100.
  EXPECT_EQ(loomcost::ringBytesSent(CollectiveKind::AllReduce, 100, 3), 133u);
  // Alone in its group, a rank sends nothing.
  for (CollectiveKind kind : loomcost::kCollectiveKinds) {
    EXPECT_EQ(loomcost::ringBytesSent(kind, s, 1), 0u) << kindName(kind);
    EXPECT_EQ(loomcost::ringSteps(kind, 1), 0) << kindName(kind);
  }
}

TEST(LinkModelTest, StepsAndTime) {
  EXPECT_EQ(loomcost::ringSteps(CollectiveKind::AllReduce, 4), 6);
  EXPECT_EQ(loomcost::ringSteps(CollectiveKind::AllGather, 4), 3);
  EXPECT_EQ(loomcost::ringSteps(CollectiveKind::Send, 8), 1);
  loomcost::LinkModel link{/*gigabytesPerSecond=*/100,
                           /*latencyMicroseconds=*/5};
  // 6 steps of 5 us, and 1.5 MB at 100 GB/s = 15 us.
  EXPECT_NEAR(link.seconds(CollectiveKind::AllReduce, 1000000, 4),
              6 * 5e-6 + 1.5e6 / 100e9, 1e-15);
  // A receive sends nothing but waits for its sender's bytes.
  EXPECT_NEAR(link.seconds(CollectiveKind::Recv, 1000000, 2),
              5e-6 + 1e6 / 100e9, 1e-15);
  EXPECT_EQ(link.seconds(CollectiveKind::AllReduce, 1000000, 1), 0);
}

TEST(LinkModelTest, KindNamesAreThePlansInstructions) {
  for (CollectiveKind kind : loomcost::kCollectiveKinds)
    EXPECT_EQ(loomcost::parseKind(kindName(kind)), kind);
  EXPECT_FALSE(loomcost::parseKind("collective_broadcast").has_value());
}

TEST(CommCostTest, LoomCollectives) {
  MLIRContext context;
  context.loadDialect<LoomDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
    module attributes {loom.world_size = 4 : i64} {
      func.func @f(%a: tensor<8x16xf32>, %b: tensor<4x16xbf16>) {
        %0 = loom.all_reduce sum %a groups [[0, 1], [2, 3]] : tensor<8x16xf32>
        %1 = loom.all_gather %b axis 0 groups [[0, 1, 2, 3]] : tensor<4x16xbf16> -> tensor<16x16xbf16>
        %2 = loom.reduce_scatter sum %a axis 0 groups [[0, 1, 2, 3]] : tensor<8x16xf32> -> tensor<2x16xf32>
        %3 = loom.add %a, %a : tensor<8x16xf32>
        return
      }
    })mlir",
                                                             &context);
  ASSERT_TRUE(module);
  loomcost::LinkModel link{/*gigabytesPerSecond=*/10,
                           /*latencyMicroseconds=*/1};
  SmallVector<std::optional<CollectiveCost>> costs;
  module->walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "loom")
      costs.push_back(estimateCollectiveCost(op, link));
  });
  ASSERT_EQ(costs.size(), 4u);
  // all_reduce of 512 bytes over pairs: 2 * 1/2 * 512, 2 steps.
  ASSERT_TRUE(costs[0]);
  EXPECT_EQ(costs[0]->kind, CollectiveKind::AllReduce);
  EXPECT_EQ(costs[0]->groupSize, 2);
  EXPECT_EQ(costs[0]->fullBytes, 512u);
  EXPECT_EQ(costs[0]->bytesSent, 512u);
  EXPECT_NEAR(costs[0]->seconds, 2e-6 + 512 / 10e9, 1e-15);
  // all_gather: S is the gathered 16x16 bf16 (512 bytes); 3/4 of it.
  ASSERT_TRUE(costs[1]);
  EXPECT_EQ(costs[1]->kind, CollectiveKind::AllGather);
  EXPECT_EQ(costs[1]->fullBytes, 512u);
  EXPECT_EQ(costs[1]->bytesSent, 384u);
  // reduce_scatter: S is the unscattered input.
  ASSERT_TRUE(costs[2]);
  EXPECT_EQ(costs[2]->kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(costs[2]->fullBytes, 512u);
  EXPECT_EQ(costs[2]->bytesSent, 384u);
  // Not a collective.
  EXPECT_FALSE(costs[3]);
}
