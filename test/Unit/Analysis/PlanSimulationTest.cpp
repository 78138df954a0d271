// The replay of a runtime plan on a cluster: the work of kernels, and the
// executor's overlap (a transfer starts when its group has posted it, and
// only an instruction touching its bytes waits for it), on hand-made plans
// whose times are worked out by hand.

#include "loom/Analysis/PlanSimulation.h"

#include <gtest/gtest.h>

using namespace mlir::loom;
using loomrt::Instruction;
using loomrt::TensorRef;

namespace {

/// 1 MB/s memory and links, no latency or launch overhead: a kernel that
/// reads and writes 1000 bytes takes 2 ms, an all-reduce of 1000 bytes
/// between two ranks 1 ms.
ClusterSpec slowCluster() {
  std::string error;
  std::optional<ClusterSpec> spec = parseClusterSpec(R"({
    "nodes": 1, "devices_per_node": 2,
    "device": {"memory_gib": 1, "peak_tflops": {"f32": 1},
               "memory_gbytes_per_s": 0.001, "memory_efficiency": 1,
               "kernel_overhead_us": 0},
    "intra_node": {"gbytes_per_s": 0.001, "latency_us": 0}})",
                                                     "slow.json", error);
  EXPECT_TRUE(spec) << error;
  return *spec;
}

/// 250 floats (1000 bytes) at arena byte `offset`.
TensorRef buffer(uint64_t offset) {
  TensorRef ref;
  ref.offset = offset;
  ref.shape = {250};
  return ref;
}

Instruction kernel(uint64_t in, uint64_t out) {
  Instruction inst;
  inst.kernel = "elementwise";
  inst.inputs = {buffer(in)};
  inst.outputs = {buffer(out)};
  return inst;
}

Instruction allReduce(uint64_t at) {
  Instruction inst;
  inst.kind = Instruction::Kind::Collective;
  inst.kernel = "all_reduce";
  inst.inputs = {buffer(at)};
  inst.outputs = {buffer(at)};
  inst.attrs["group"] = int64_t(0);
  return inst;
}

Instruction transfer(const char *kind, int64_t peer, uint64_t at) {
  Instruction inst;
  inst.kind = Instruction::Kind::Collective;
  inst.kernel = kind;
  if (std::string(kind) == "send")
    inst.inputs = {buffer(at)};
  else
    inst.outputs = {buffer(at)};
  inst.attrs["peer"] = peer;
  inst.attrs["tag"] = int64_t(7);
  return inst;
}

loomrt::Plan twoRanks() {
  loomrt::Plan plan;
  plan.groups = {{0, 1}};
  plan.ranks.resize(2);
  plan.ranks[1].rank = 1;
  return plan;
}

} // namespace

TEST(PlanSimulationTest, TransfersOverlapWhatDoesNotTouchThem) {
  loomrt::Plan plan = twoRanks();
  // Rank 0 posts the all-reduce of buffer 0 at once, computes on buffer
  // 4096 meanwhile, then reads buffer 0. Rank 1 computes 2 ms first, so the
  // transfer runs from 2 to 3 ms; rank 0's second kernel (2 to 4 ms) did
  // not need it, its third waits until 4 ms anyway.
  plan.ranks[0].instructions = {allReduce(0), kernel(4096, 8192),
                                kernel(8192, 4096), kernel(0, 8192)};
  plan.ranks[1].instructions = {kernel(4096, 8192), allReduce(0),
                                kernel(0, 8192)};
  PlanSimulation sim = simulatePlan(plan, slowCluster(), true);
  ASSERT_TRUE(sim.error.empty()) << sim.error;
  EXPECT_NEAR(sim.ranks[0].stepSeconds, 6e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[0].waitSeconds, 0, 1e-12);
  // Rank 1 waits from 2 ms (its post) to 3 ms (the transfer's end).
  EXPECT_NEAR(sim.ranks[1].stepSeconds, 5e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[1].waitSeconds, 1e-3, 1e-12);
  EXPECT_NEAR(sim.stepSeconds, 6e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[0].commSeconds["all_reduce"], 1e-3, 1e-12);
  int transfers = 0;
  for (const PlanSimulationEvent &event : sim.events)
    if (event.communication) {
      ++transfers;
      EXPECT_NEAR(event.start, 2e-3, 1e-12);
      EXPECT_NEAR(event.end, 3e-3, 1e-12);
    }
  EXPECT_EQ(transfers, 2);
}

TEST(PlanSimulationTest, AReaderWaitsForTheTransfer) {
  loomrt::Plan plan = twoRanks();
  // Both post at 0; the next kernel reads the reduced buffer: it starts at
  // 1 ms.
  for (int r = 0; r < 2; ++r)
    plan.ranks[r].instructions = {allReduce(0), kernel(0, 4096)};
  PlanSimulation sim = simulatePlan(plan, slowCluster());
  EXPECT_NEAR(sim.stepSeconds, 3e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[0].waitSeconds, 1e-3, 1e-12);
  // Two all-reduces on one communicator run one after the other.
  for (int r = 0; r < 2; ++r)
    plan.ranks[r].instructions = {allReduce(0), allReduce(4096)};
  sim = simulatePlan(plan, slowCluster());
  EXPECT_NEAR(sim.stepSeconds, 2e-3, 1e-12);
}

TEST(PlanSimulationTest, AReceiveMeetsItsSend) {
  loomrt::Plan plan = twoRanks();
  // Rank 0 computes 2 ms and sends 1000 bytes (1 ms); rank 1 posts the
  // receive at once and its kernel reads what arrives: 3 to 5 ms.
  plan.ranks[0].instructions = {kernel(0, 4096), transfer("send", 1, 4096)};
  plan.ranks[1].instructions = {transfer("recv", 0, 0), kernel(0, 4096)};
  PlanSimulation sim = simulatePlan(plan, slowCluster());
  ASSERT_TRUE(sim.error.empty()) << sim.error;
  EXPECT_NEAR(sim.ranks[1].stepSeconds, 5e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[1].waitSeconds, 3e-3, 1e-12);
  // The sender's step ends when its send is done.
  EXPECT_NEAR(sim.ranks[0].stepSeconds, 3e-3, 1e-12);
}

TEST(PlanSimulationTest, CopiesWaitOnlyForTheirOwnMicrobatchsTransfers) {
  // Rank 0 sends buffer 0 to rank 1, whose receive comes after a 2 ms
  // kernel: the send ends at 3 ms. Rank 0 then overwrites buffer 0.
  loomrt::Plan plan = twoRanks();
  plan.ranks[0].instructions = {transfer("send", 1, 0), kernel(4096, 0)};
  plan.ranks[1].instructions = {kernel(8192, 8192), transfer("recv", 0, 0)};
  std::vector<InstructionSequence> programs(2);
  for (int r = 0; r < 2; ++r)
    for (const Instruction &inst : plan.ranks[r].instructions)
      programs[r].push_back(&inst);
  // Copies made for the same microbatch: the kernel waits for the send,
  // 3 + 2 ms (as simulatePlan has it).
  std::vector<std::vector<ProgramCopy>> same = {{{0, 2}, {0, 2}},
                                                {{0, 2}, {0, 2}}};
  PlanSimulation waits =
      simulatePrograms(plan, programs, slowCluster(), false, &same);
  ASSERT_TRUE(waits.error.empty()) << waits.error;
  EXPECT_NEAR(waits.ranks[0].stepSeconds, 5e-3, 1e-12);
  EXPECT_NEAR(simulatePlan(plan, slowCluster()).ranks[0].stepSeconds, 5e-3,
              1e-12);
  // Made for another microbatch, the kernel does not wait (a plan of every
  // microbatch gives it a buffer of its own); the step still ends with
  // the send, at 3 ms.
  std::vector<std::vector<ProgramCopy>> other = {{{0, 2}, {1, 2}},
                                                 {{0, 2}, {0, 2}}};
  PlanSimulation free =
      simulatePrograms(plan, programs, slowCluster(), false, &other);
  EXPECT_NEAR(free.ranks[0].stepSeconds, 3e-3, 1e-12);
  EXPECT_NEAR(free.ranks[0].waitSeconds, 1e-3, 1e-12);
}

TEST(PlanSimulationTest, RanksWithoutAProgramMirrorTheirRepresentative) {
  // A plan of representatives (buildRepresentativePlan): rank 1 runs a copy
  // of rank 0's program, so the all-reduce starts when rank 0 posts it, on
  // the link of the whole group.
  loomrt::Plan plan = twoRanks();
  plan.ranks[0].instructions = {kernel(4096, 8192), allReduce(0),
                                kernel(0, 8192)};
  PlanSimulation sim = simulatePlan(plan, slowCluster());
  ASSERT_TRUE(sim.error.empty()) << sim.error;
  EXPECT_NEAR(sim.stepSeconds, 5e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[0].waitSeconds, 1e-3, 1e-12);
  EXPECT_NEAR(sim.ranks[1].stepSeconds, 0, 1e-12);
}

TEST(PlanSimulationTest, AnUnmatchedTransferIsAnError) {
  loomrt::Plan plan = twoRanks();
  plan.ranks[0].instructions = {allReduce(0), kernel(0, 4096)};
  plan.ranks[1].instructions = {kernel(0, 4096)};
  PlanSimulation sim = simulatePlan(plan, slowCluster());
  EXPECT_FALSE(sim.error.empty());
}

TEST(PlanSimulationTest, GemmAndAttentionWork) {
  Instruction matmul;
  matmul.kernel = "matmul";
  TensorRef a, b, c;
  // A^T: A is [K=64, M=32], B is [K=64, N=16] (not transposed), C [2,32,16].
  a.shape = {2, 64, 32};
  b.shape = {64, 16};
  c.shape = {2, 32, 16};
  a.dtype = b.dtype = loomrt::DType::BF16;
  matmul.inputs = {a, b};
  matmul.outputs = {c};
  matmul.attrs["transpose_lhs"] = int64_t(1);
  InstructionWork work = estimateInstructionWork(matmul);
  EXPECT_DOUBLE_EQ(work.gemmFlops, 2.0 * 2 * 32 * 16 * 64);
  EXPECT_DOUBLE_EQ(work.modelFlops, work.gemmFlops);
  EXPECT_DOUBLE_EQ(work.gemmMinDim, 16);
  EXPECT_EQ(work.precision, "bf16");
  EXPECT_DOUBLE_EQ(work.bytes, (2 * 64 * 32 + 64 * 16) * 2 + 2 * 32 * 16 * 4);

  // Attention over [B=2, H=3, S=8, D=4]: two products of 2 * 48 rows * 8 *
  // 4 FLOPs forward; the backward counts twice that (Megatron) and
  // executes 2.5 times.
  Instruction attention;
  attention.kernel = "attention";
  TensorRef q, lse;
  q.shape = {2, 3, 8, 4};
  lse.shape = {2, 3, 8};
  attention.inputs = {q, q, q};
  attention.outputs = {q, lse};
  work = estimateInstructionWork(attention);
  double forward = 2.0 * 48 * 8 * (4 + 4);
  EXPECT_DOUBLE_EQ(work.gemmFlops, forward);
  Instruction backward;
  backward.kernel = "attention_backward";
  backward.inputs = {q, q, q, q, lse, q};
  backward.outputs = {q, q, q};
  work = estimateInstructionWork(backward);
  EXPECT_DOUBLE_EQ(work.modelFlops, 2 * forward);
  EXPECT_DOUBLE_EQ(work.gemmFlops, 2.5 * forward);
  // Packed and sequence-major: qkv [B=2, S=8, 3, H=3, D=4], lse [2, 8, 3].
  TensorRef qkv, seqLse, out;
  qkv.shape = {2, 8, 3, 3, 4};
  seqLse.shape = {2, 8, 3};
  out.shape = {2, 8, 3, 4};
  attention.inputs = {qkv};
  attention.outputs = {out, seqLse};
  attention.attrs["packed_qkv"] = int64_t(1);
  attention.attrs["seq_major"] = int64_t(1);
  EXPECT_DOUBLE_EQ(estimateInstructionWork(attention).gemmFlops, forward);

  // An elementwise program runs each operation over its outputs' shape
  // (inputs broadcast); constants cost nothing. A slice reads what it
  // writes.
  Instruction program = kernel(0, 1000);
  program.inputs.push_back(TensorRef());
  loomrt::ProgramOp exp, add, one;
  exp.op = "exp";
  exp.operands = {0};
  one.op = "const";
  add.op = "add";
  add.operands = {2, 3};
  program.program = {exp, one, add};
  work = estimateInstructionWork(program);
  EXPECT_EQ(work.elementOps.size(), 2u);
  EXPECT_DOUBLE_EQ(work.elementOps["exp"], 250);
  EXPECT_DOUBLE_EQ(work.elementOps["add"], 250);
  Instruction slice = kernel(0, 4096);
  slice.kernel = "slice";
  slice.inputs[0].shape = {1000};
  EXPECT_DOUBLE_EQ(estimateInstructionWork(slice).bytes, 2000);
}

TEST(PlanSimulationTest, LiveArenaBytes) {
  // in (1000 bytes at 0) -> a at 4096 -> b at 0 (reusing in's slot, dead
  // after the first kernel) -> c at 8192 reads a and b: a lives 0..2, b
  // 1..2, c from 2 on.
  loomrt::RankProgram program;
  program.inputs.push_back({"in", buffer(0), -1});
  program.instructions = {kernel(0, 4096), kernel(4096, 0)};
  Instruction sum = kernel(4096, 8192);
  sum.inputs.push_back(buffer(0));
  program.instructions.push_back(sum);
  program.outputs.push_back({"out", buffer(8192), -1});
  std::vector<uint64_t> live = liveArenaBytes(program);
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[0], 2000u); // in and a
  EXPECT_EQ(live[1], 2000u); // a and b (in was overwritten)
  EXPECT_EQ(live[2], 3000u); // a, b and c
}

TEST(PlanSimulationTest, LiveArenaBytesCountAnInPlaceWriteOnce) {
  // a at 0 -> s at 4096 -> s' written over s (an elementwise kernel's
  // output in place of the input it reads last, as loom-plan-memory places
  // a gradient sum) -> out at 8192: s and s' are one buffer where they
  // meet.
  loomrt::RankProgram program;
  program.inputs.push_back({"a", buffer(0), -1});
  program.instructions = {kernel(0, 4096), kernel(4096, 4096),
                          kernel(4096, 8192)};
  program.outputs.push_back({"out", buffer(8192), -1});
  std::vector<uint64_t> live = liveArenaBytes(program);
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[0], 2000u); // a and s
  EXPECT_EQ(live[1], 1000u); // s, then s' in its bytes (a is dead)
  EXPECT_EQ(live[2], 2000u); // s' and out
}
