// The cluster description: parsing, its errors, which link a group uses, and
// the times of kernels and collectives worked out by hand.

#include "loom/Analysis/Cluster.h"

#include <gtest/gtest.h>

using namespace mlir::loom;
using loomcost::CollectiveKind;

namespace {

const char *kTwoNodes = R"({
  "nodes": 2, "devices_per_node": 4,
  "device": {"memory_gib": 80, "peak_tflops": {"bf16": 300, "f32": 20},
             "memory_gbytes_per_s": 2000, "gemm_efficiency": 0.5,
             "gemm_half_dim": 100, "memory_efficiency": 0.5,
             "kernel_overhead_us": 10},
  "intra_node": {"gbytes_per_s": 200, "latency_us": 2},
  "inter_node": {"gbytes_per_s": 20, "latency_us": 10}
})";

ClusterSpec parseOrDie(const char *json) {
  std::string error;
  std::optional<ClusterSpec> spec = parseClusterSpec(json, "test.json", error);
  EXPECT_TRUE(spec) << error;
  return spec.value_or(ClusterSpec());
}

std::string errorOf(const std::string &json) {
  std::string error;
  EXPECT_FALSE(parseClusterSpec(json, "bad.json", error));
  return error;
}

} // namespace

TEST(ClusterTest, ParsesEveryKey) {
  ClusterSpec spec = parseOrDie(kTwoNodes);
  EXPECT_EQ(spec.devices(), 8);
  EXPECT_EQ(spec.memoryBytes(), 80ull << 30);
  EXPECT_DOUBLE_EQ(spec.peakFlops("bf16"), 300e12);
  EXPECT_DOUBLE_EQ(spec.peakFlops("f32"), 20e12);
  EXPECT_DOUBLE_EQ(spec.device.gemmHalfDim, 100);
  EXPECT_DOUBLE_EQ(spec.intraNode.gigabytesPerSecond, 200);
  EXPECT_DOUBLE_EQ(spec.interNode.latencyMicroseconds, 10);
}

TEST(ClusterTest, OneNodeNeedsNoNetwork) {
  ClusterSpec spec = parseOrDie(R"({"nodes": 1, "devices_per_node": 2,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 10},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})");
  EXPECT_DOUBLE_EQ(spec.interNode.gigabytesPerSecond, 5);
  // Defaults where the file says nothing.
  EXPECT_DOUBLE_EQ(spec.device.gemmEfficiency, 0.8);
  // bf16 falls back to the f32 peak when the device lists none.
  EXPECT_DOUBLE_EQ(spec.peakFlops("bf16"), 1e12);
}

TEST(ClusterTest, ErrorsNameTheKey) {
  EXPECT_NE(errorOf("{").find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_EQ(errorOf("[]"), "bad.json: a cluster description is a JSON object");
  std::string base = R"("device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
    "memory_gbytes_per_s": 10}, "intra_node": {"gbytes_per_s": 5,
    "latency_us": 1})";
  EXPECT_EQ(errorOf("{\"devices_per_node\": 2, " + base + "}"),
            "bad.json: 'nodes' is missing");
  EXPECT_EQ(errorOf("{\"nodes\": 0, \"devices_per_node\": 2, " + base + "}"),
            "bad.json: 'nodes' must be a whole number >= 1");
  EXPECT_EQ(errorOf("{\"nodes\": 2, \"devices_per_node\": 2, " + base + "}"),
            "bad.json: 'inter_node' is missing");
  EXPECT_NE(errorOf("{\"nodes\": 1, \"devices_per_node\": 2, \"gpus\": 3, " +
                    base + "}")
                .find("bad.json: 'gpus' is not a key of a cluster description"),
            std::string::npos);
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": -1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 10},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.memory_gib' must be > 0 (it is -1)");
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {},
               "memory_gbytes_per_s": 10},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.peak_tflops' lists no precision (f32, bf16)");
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": "fast"},
               "memory_gbytes_per_s": 10},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.peak_tflops.f32' must be a number");
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 10, "gemm_efficiency": 1.5},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.gemm_efficiency' must be > 0 and <= 1 (it is "
            "1.5)");
}

TEST(ClusterTest, GroupsWithinANodeUseItsLink) {
  ClusterSpec spec = parseOrDie(kTwoNodes);
  EXPECT_EQ(&spec.linkFor({0, 1, 2, 3}), &spec.intraNode);
  EXPECT_EQ(&spec.linkFor({4, 5}), &spec.intraNode);
  EXPECT_EQ(&spec.linkFor({3, 4}), &spec.interNode);
  EXPECT_EQ(&spec.linkFor({0, 4}), &spec.interNode);
}

TEST(ClusterTest, CollectiveTimes) {
  ClusterSpec spec = parseOrDie(kTwoNodes);
  double mib = double(1 << 20);
  // An all-gather of 1 MiB over 4 ranks of a node: 3 steps of 2 us and
  // 3/4 MiB at 200 GB/s.
  EXPECT_NEAR(
      spec.collectiveSeconds(CollectiveKind::AllGather, 1 << 20, {0, 1, 2, 3}),
      3 * 2e-6 + 0.75 * mib / 200e9, 1e-12);
  // Across the two nodes: the network's latency and bandwidth.
  EXPECT_NEAR(
      spec.collectiveSeconds(CollectiveKind::AllGather, 1 << 20, {0, 4}),
      10e-6 + 0.5 * mib / 20e9, 1e-12);
  // A small all-reduce over 8 ranks takes the tree: 2 log2(8) = 6 steps
  // instead of the ring's 14.
  EXPECT_NEAR(spec.collectiveSeconds(CollectiveKind::AllReduce, 8,
                                     {0, 1, 2, 3, 4, 5, 6, 7}),
              6 * 10e-6 + 14.0 / 20e9, 1e-12);
  // A send moves the whole buffer in one step.
  EXPECT_NEAR(spec.collectiveSeconds(CollectiveKind::Send, 1 << 20, {0, 1}),
              2e-6 + mib / 200e9, 1e-12);
}

TEST(ClusterTest, CollectivesByKind) {
  // The node's all-gathers measured at 50 GB/s and 4 us per step; the
  // other kinds keep the link's 200 GB/s and 2 us.
  ClusterSpec spec = parseOrDie(R"({
    "nodes": 1, "devices_per_node": 4,
    "device": {"memory_gib": 80, "peak_tflops": {"f32": 20},
               "memory_gbytes_per_s": 2000},
    "intra_node": {"gbytes_per_s": 200, "latency_us": 2,
                   "by_kind": {"all_gather": {"gbytes_per_s": 50,
                                              "latency_us": 4}}}
  })");
  double mib = double(1 << 20);
  EXPECT_NEAR(
      spec.collectiveSeconds(CollectiveKind::AllGather, 1 << 20, {0, 1, 2, 3}),
      3 * 4e-6 + 0.75 * mib / 50e9, 1e-12);
  EXPECT_NEAR(spec.collectiveSeconds(CollectiveKind::ReduceScatter, 1 << 20,
                                     {0, 1, 2, 3}),
              3 * 2e-6 + 0.75 * mib / 200e9, 1e-12);

  std::string base = R"("nodes": 1, "devices_per_node": 4,
    "device": {"memory_gib": 80, "peak_tflops": {"f32": 20},
               "memory_gbytes_per_s": 2000},)";
  EXPECT_EQ(errorOf("{" + base + R"("intra_node": {"gbytes_per_s": 200,
      "latency_us": 2, "by_kind": {"all_gahter": {"gbytes_per_s": 1,
      "latency_us": 1}}}})"),
            "bad.json: 'intra_node.by_kind.all_gahter' is not a collective "
            "(all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, "
            "send, recv)");
  EXPECT_EQ(errorOf("{" + base + R"("intra_node": {"gbytes_per_s": 200,
      "latency_us": 2, "by_kind": {"all_gather": {"gbytes_per_s": 0,
      "latency_us": 1}}}})"),
            "bad.json: 'intra_node.by_kind.all_gather.gbytes_per_s' must be > "
            "0 (it is 0)");
}

TEST(ClusterTest, KernelRoofline) {
  ClusterSpec spec = parseOrDie(kTwoNodes);
  // A 100-wide GEMM reaches half of the 0.5 efficiency: 2e12 FLOPs at 75
  // TFLOP/s (bf16), plus 10 us of launch.
  EXPECT_NEAR(spec.kernelSeconds(2e12, 100, "bf16", 1e6), 2e12 / 75e12 + 10e-6,
              1e-12);
  // Memory-bound: 1 GB at half of 2000 GB/s.
  EXPECT_NEAR(spec.kernelSeconds(0, 0, "f32", 1e9), 1e9 / 1000e9 + 10e-6,
              1e-12);
}

TEST(ClusterTest, KernelsByKind) {
  ClusterSpec spec = parseOrDie(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 10},
               "memory_gbytes_per_s": 100, "gemm_efficiency": 1,
               "gemm_half_dim": 0, "memory_efficiency": 1,
               "kernel_overhead_us": 0,
               "kernel_tflops": {"attention": 0.5,
                                 "attention_backward": 1},
               "kernel_ns_per_score": {"attention_backward": 3,
                                       "attention_other": 3},
               "kernel_ns_per_row_element": {"attention_backward": 2},
               "kernel_gbytes_per_s": {"cross_entropy": 10},
               "kernel_latency_us": {"attention": 100},
               "elementwise_ns": {"exp": 2, "add": 0}},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})");
  loomrt::InstructionWork attention;
  attention.gemmFlops = 1e12;
  attention.gemmMinDim = 64;
  // The kind's measured rate, not the GEMM peak's 0.1 s, and its latency.
  EXPECT_NEAR(spec.kernelSeconds(attention, "attention"), 2.0 + 1e-4, 1e-12);
  // Its backward's rate, 3 ns per score and 2 ns per row element on top
  // of it; a kind with costs per unit and no rate: those alone.
  attention.scores = 1e8;
  attention.rowElements = 1e7;
  EXPECT_NEAR(spec.kernelSeconds(attention, "attention_backward"),
              1.0 + 0.3 + 0.02, 1e-12);
  EXPECT_NEAR(spec.kernelSeconds(attention, "attention_other"), 0.3, 1e-12);
  EXPECT_NEAR(spec.kernelSeconds(attention, "matmul"), 0.1, 1e-12);
  loomrt::InstructionWork loss;
  loss.bytes = 1e9;
  EXPECT_NEAR(spec.kernelSeconds(loss, "cross_entropy"), 0.1, 1e-12);
  EXPECT_NEAR(spec.kernelSeconds(loss, "layer_norm"), 0.01, 1e-12);
  // An elementwise program: 1e9 exps at 2 ns, then its 1e8 bytes at 100
  // GB/s (a CPU's program computes and streams one after the other).
  loomrt::InstructionWork program;
  program.bytes = 1e8;
  program.elementOps = {{"exp", 1e9}, {"add", 1e9}, {"erf", 1e9}};
  EXPECT_NEAR(spec.kernelSeconds(program, "elementwise"), 2.0 + 1e-3, 1e-12);
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 10, "kernel_tflops": {"attention": 0}},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.kernel_tflops.attention' must be > 0 (it is 0)");
  EXPECT_EQ(errorOf(R"({"nodes": 1, "devices_per_node": 1,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 10, "elementwise_ns": {"exp": "slow"}},
    "intra_node": {"gbytes_per_s": 5, "latency_us": 1}})"),
            "bad.json: 'device.elementwise_ns.exp' must be a number");
}
