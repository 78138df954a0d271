//===- SessionTest.cpp - The session library: checkpoints and launching ---===//
//
// The checkpoint index's text and its parser's errors, which ranks hold
// which state, checkpoints written and loaded through executors (and the
// errors for checkpoints of another plan or an interrupted write), the
// launcher's abort propagation on thread ranks, and the trainer on two
// ranks that split a batch.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Session/Checkpoint.h"
#include "loom/Runtime/Session/Launcher.h"
#include "loom/Runtime/Session/Report.h"
#include "loom/Runtime/Session/Trace.h"
#include "loom/Runtime/Session/Trainer.h"
#include "loom/Runtime/TensorIO.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <omp.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

using namespace loomrt;

namespace {

TensorRef arena(uint64_t offset, std::vector<int64_t> shape) {
  TensorRef ref;
  ref.offset = offset;
  ref.shape = std::move(shape);
  return ref;
}

TensorRef weightRef(uint64_t id, std::vector<int64_t> shape,
                    DType dtype = DType::F32) {
  TensorRef ref;
  ref.space = TensorRef::Space::Weight;
  ref.offset = id;
  ref.shape = std::move(shape);
  ref.dtype = dtype;
  return ref;
}

Weight weight(std::string name, std::vector<int64_t> shape, uint64_t offset,
              bool state, DType dtype = DType::F32) {
  Weight result;
  result.name = std::move(name);
  result.dtype = dtype;
  result.shape = std::move(shape);
  result.offset = offset;
  result.bytes = numElements(result.shape) * dtypeSize(dtype);
  result.state = state;
  return result;
}

/// An elementwise `target += input` (target a weight).
Instruction accumulate(const TensorRef &target, const TensorRef &input) {
  Instruction add;
  add.kernel = "elementwise";
  add.inputs = {target, input};
  add.outputs = {target};
  ProgramOp op;
  op.op = "add";
  op.operands = {0, 1};
  add.program.push_back(op);
  add.yields = {2};
  return add;
}

/// Two ranks: rank 0 adds its input to state weight "a" and reads "c"'s
/// bf16 copy "c.bf16"; rank 1 adds its input to "b" and to "a". "frozen" is
/// not state; "idle" is state no rank refers to.
std::shared_ptr<Plan> twoRankPlan() {
  auto plan = std::make_shared<Plan>();
  plan->weights.push_back(weight("a", {2}, 0, true));
  plan->weights.push_back(weight("b", {2}, 64, true));
  plan->weights.push_back(weight("frozen", {2}, 128, false));
  plan->weights.push_back(weight("c", {2}, 192, true));
  Weight copy = weight("c.bf16", {2}, 256, true, DType::BF16);
  copy.castOf = 3;
  plan->weights.push_back(copy);
  plan->weights.push_back(weight("idle", {1}, 320, true, DType::F64));
  plan->data.resize(384);
  float values[] = {1, 2};
  for (uint64_t offset : {0, 64, 128, 192})
    std::memcpy(plan->data.data() + offset, values, 8);

  RankProgram &rank0 = plan->ranks.emplace_back();
  rank0.rank = 0;
  rank0.arenaBytes = 128;
  rank0.inputs.push_back({"x", arena(0, {2})});
  rank0.outputs.push_back({"c", weightRef(4, {2}, DType::BF16)});
  rank0.instructions.push_back(accumulate(weightRef(0, {2}), arena(0, {2})));
  RankProgram &rank1 = plan->ranks.emplace_back();
  rank1.rank = 1;
  rank1.arenaBytes = 128;
  rank1.inputs.push_back({"x", arena(0, {2})});
  rank1.instructions.push_back(accumulate(weightRef(1, {2}), arena(0, {2})));
  rank1.instructions.push_back(accumulate(weightRef(0, {2}), arena(0, {2})));
  return plan;
}

HostTensor floats(std::vector<float> values) {
  HostTensor tensor;
  tensor.shape = {int64_t(values.size())};
  tensor.data.resize(values.size() * sizeof(float));
  std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

std::vector<float> valuesOf(const HostTensor &tensor) {
  std::vector<float> values(tensor.data.size() / sizeof(float));
  std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

/// A fresh folder under the temporary directory, removed at the end.
struct TempFolder {
  explicit TempFolder(const std::string &name) {
    const char *base = std::getenv("TMPDIR");
    path = std::string(base ? base : "/tmp") + "/loom-session-" +
           std::to_string(getpid()) + "-" + name;
    remove();
    EXPECT_EQ(mkdir(path.c_str(), 0777), 0);
  }
  ~TempFolder() { remove(); }
  void remove() {
    std::string command = "rm -rf '" + path + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }
  std::string path;
};

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string indexError(const std::string &text) {
  StatusOr<CheckpointIndex> index = parseCheckpointIndex(text, "ck/index");
  return index.isOk() ? "" : index.status().message();
}

const std::string kIndex = "loom-checkpoint 3\n"
                           "step 7\n"
                           "ranks 2\n"
                           "rank 0 rank0.ckpt\n"
                           "rank 1 rank1.ckpt\n"
                           "weights 4\n"
                           "weight f32 [2] 0,1 a\n"
                           "weight f32 [2] 1 b\n"
                           "weight f32 [2] 0 c\n"
                           "weight f64 [1] 0 idle\n";

} // namespace

//===----------------------------------------------------------------------===//
// Which ranks hold what, and the index
//===----------------------------------------------------------------------===//

TEST(CheckpointTest, HoldersAreTheRanksThatReferToAWeight) {
  std::shared_ptr<Plan> plan = twoRankPlan();
  std::vector<std::vector<int>> holders = stateWeightHolders(*plan);
  ASSERT_EQ(holders.size(), 6u);
  EXPECT_EQ(holders[0], (std::vector<int>{0, 1})); // both update "a"
  EXPECT_EQ(holders[1], (std::vector<int>{1}));
  EXPECT_TRUE(holders[2].empty());              // not state
  EXPECT_EQ(holders[3], (std::vector<int>{0})); // the master of a used copy
  EXPECT_EQ(holders[4], (std::vector<int>{0}));
  EXPECT_EQ(holders[5], (std::vector<int>{0})); // used by none: rank 0
  EXPECT_EQ(rankStateWeights(*plan, 0), (std::vector<size_t>{0, 3, 4, 5}));
  EXPECT_EQ(rankStateWeights(*plan, 1), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(stateWeights(*plan), (std::vector<size_t>{0, 1, 3, 4, 5}));
}

TEST(ReportTest, UsageOfEachRank) {
  // --report-json's fields: rank 0 holds a and c (trained, f32[2]),
  // c.bf16 (c's bf16 copy) and optimizer.step (f64[1]); rank 1 a and b.
  // As ZeRO counts mixed precision, c's copy is the parameter and c its
  // f32 master, optimizer state; the gradients are a's and c's.
  std::shared_ptr<Plan> plan = twoRankPlan();
  plan->weights[5].name = "optimizer.step";
  RunReport report;
  report.measuredPeakBytes = 4242;
  report.commBytesSent = {{"all_reduce", 64}, {"recv", 0}};
  RankUsage zero = rankUsage(*plan, 0, report);
  EXPECT_EQ(zero.paramBytes, 8u + 4u);
  EXPECT_EQ(zero.gradBytes, 16u);
  EXPECT_EQ(zero.optimizerBytes, 8u + 8u);
  // The arena and the weights as the executor allocates them: each state
  // weight and copy in memory of its own, aligned to 256 bytes.
  EXPECT_EQ(zero.plannedPeakBytes, 128u + 4 * kOwnedWeightAlignment);
  EXPECT_EQ(zero.measuredPeakBytes, 4242u);
  // A plan that says what the gradients take (ZeRO's shards) is believed.
  plan->ranks[0].gradientBytes = 4;
  EXPECT_EQ(rankUsage(*plan, 0, report).gradBytes, 4u);
  plan->ranks[0].gradientBytes = -1;
  RankUsage one = rankUsage(*plan, 1, RunReport());
  EXPECT_EQ(one.paramBytes, 16u);
  EXPECT_EQ(one.optimizerBytes, 0u);
  EXPECT_EQ(one.plannedPeakBytes, 128u + 2 * kOwnedWeightAlignment);
  // Between processes as integers, and back.
  std::vector<int64_t> packed = packUsage(zero);
  ASSERT_EQ(packed.size(), packedUsageSize());
  RankUsage back = unpackUsage(packed.data());
  EXPECT_EQ(formatReportJson({back, one}), formatReportJson({zero, one}));
  EXPECT_EQ(
      formatReportJson({zero, one}),
      "{\"ranks\": [\n"
      "  {\"rank\": 0, \"param_bytes\": 12, \"grad_bytes\": 16, "
      "\"optimizer_bytes\": 16, \"planned_peak_bytes\": 1152, "
      "\"measured_peak_bytes\": 4242, \"comm_bytes\": {\"all_reduce\": 64, "
      "\"all_gather\": 0, \"reduce_scatter\": 0, \"all_to_all\": 0, "
      "\"broadcast\": 0, \"send\": 0}},\n"
      "  {\"rank\": 1, \"param_bytes\": 16, \"grad_bytes\": 16, "
      "\"optimizer_bytes\": 0, \"planned_peak_bytes\": 640, "
      "\"measured_peak_bytes\": 0, \"comm_bytes\": {\"all_reduce\": 0, "
      "\"all_gather\": 0, \"reduce_scatter\": 0, \"all_to_all\": 0, "
      "\"broadcast\": 0, \"send\": 0}}\n"
      "]}\n");
}

TEST(ReportTest, ArenaPeakNamesTheLiveTensors) {
  // A step input x (64 bytes at 0), then y = f(x) at 64, z = g(y) at 0
  // (x dead), w = h(y, z) at 128, z += w in place, and the output z: y, z
  // and w are alive at instruction 2, 64 + 64 + 128 bytes (and at 3, the
  // old z, the new and w: the first such instruction is the peak).
  Plan plan;
  plan.ranks.resize(1);
  RankProgram &program = plan.ranks[0];
  auto arena = [](uint64_t offset, int64_t elements) {
    TensorRef ref;
    ref.offset = offset;
    ref.shape = {elements};
    return ref;
  };
  program.inputs.push_back({"x", arena(0, 16)});
  auto kernel = [&](std::vector<TensorRef> in, std::vector<TensorRef> out) {
    Instruction instruction;
    instruction.kernel = "elementwise";
    instruction.inputs = std::move(in);
    instruction.outputs = std::move(out);
    program.instructions.push_back(instruction);
  };
  kernel({arena(0, 16)}, {arena(64, 16)});                 // y
  kernel({arena(64, 16)}, {arena(0, 16)});                 // z, x's bytes
  kernel({arena(64, 16), arena(0, 16)}, {arena(128, 32)}); // w
  kernel({arena(0, 16), arena(128, 32)}, {arena(0, 16)});  // z += w
  program.outputs.push_back({"z", arena(0, 16)});
  ArenaPeak peak = arenaPeak(plan, 0, 2);
  EXPECT_EQ(peak.instruction, 2u);
  EXPECT_EQ(peak.liveBytes, 64u + 64u + 128u);
  EXPECT_EQ(peak.liveTensors, 3u);
  ASSERT_EQ(peak.largest.size(), 2u);
  EXPECT_EQ(peak.largest[0].ref.bytes(), 128u);
  EXPECT_EQ(peak.largest[0].writer, 2);
  // x (the step input) died where z overwrote it: the two 64-byte tensors
  // alive at 2 are y and z.
  EXPECT_EQ(peak.largest[1].ref.bytes(), 64u);
  EXPECT_TRUE(peak.largest[1].writer == 0 || peak.largest[1].writer == 1);
}

TEST(ReportTest, PipelineBubbleIsMeasuredFromActions) {
  // A pipeline rank: F0.0's kernel, a kernel outside the actions, a wait,
  // then B0.0's kernel. From the first action kernel's start (0) to the
  // last's end (50 ns), action kernels ran 20 ns: a bubble of 60%.
  Plan plan;
  plan.ranks.resize(1);
  for (const char *action : {"F0.0", "", "B0.0"}) {
    Instruction inst;
    inst.kernel = "matmul";
    inst.action = action;
    plan.ranks[0].instructions.push_back(inst);
  }
  std::vector<TraceEvent> events = {
      {0, false, 0, 10}, {1, false, 10, 20}, {2, false, 40, 50}};
  EXPECT_DOUBLE_EQ(measuredBubble(plan, 0, events), 0.6);
  // Each action is a slice of the "pipeline" track.
  std::string trace = formatTrace(plan, {events});
  EXPECT_NE(trace.find("\"name\": \"F s0 mb0\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\": \"B s0 mb0\""), std::string::npos);
  EXPECT_NE(trace.find("\"args\": {\"name\": \"pipeline\"}"),
            std::string::npos);
  EXPECT_EQ(describeAction("W12.345"), "W s12 mb345");
  // Reported (and sent between processes) only where measured.
  RankUsage usage;
  usage.bubbleFraction = measuredBubble(plan, 0, events);
  RankUsage back = unpackUsage(packUsage(usage).data());
  EXPECT_NEAR(back.bubbleFraction, 0.6, 1e-9);
  EXPECT_NE(formatReportJson({back}).find("\"bubble_fraction\": 0.600000"),
            std::string::npos);
  // Without actions (no pipeline): nothing to measure, nothing reported.
  for (Instruction &inst : plan.ranks[0].instructions)
    inst.action.clear();
  EXPECT_EQ(measuredBubble(plan, 0, events), -1);
  EXPECT_EQ(formatTrace(plan, {events}).find("pipeline"), std::string::npos);
  usage.bubbleFraction = -1;
  back = unpackUsage(packUsage(usage).data());
  EXPECT_EQ(formatReportJson({back}).find("bubble_fraction"),
            std::string::npos);
}

TEST(CheckpointTest, ExecutorsHoldWhatTheirRankHolds) {
  // Every weight's holders, and each executor allocates exactly its own: a
  // rank does not copy the state another rank trains (a tensor-parallel
  // rank keeps its slices, not the others'), and the checkpoint's holders
  // are the executors'.
  std::shared_ptr<Plan> plan = twoRankPlan();
  std::vector<std::vector<int>> holders = weightHolders(*plan);
  ASSERT_EQ(holders.size(), 6u);
  EXPECT_EQ(holders[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(holders[1], (std::vector<int>{1}));
  EXPECT_TRUE(holders[2].empty()); // read-only, and read by no rank
  EXPECT_EQ(holders[3], (std::vector<int>{0}));
  EXPECT_EQ(holders[4], (std::vector<int>{0}));
  EXPECT_EQ(holders[5], (std::vector<int>{0}));
  EXPECT_EQ(rankHeldWeights(*plan, 0),
            (std::vector<bool>{true, false, false, true, true, true}));
  EXPECT_EQ(rankHeldWeights(*plan, 1),
            (std::vector<bool>{true, true, false, false, false, false}));

  for (int rank = 0; rank < 2; ++rank) {
    auto executor = Executor::create(plan, rank);
    ASSERT_TRUE(executor.isOk()) << executor.status().message();
    std::vector<bool> held = rankHeldWeights(*plan, rank);
    for (size_t id = 0; id < held.size(); ++id)
      EXPECT_EQ((*executor)->holds(id), held[id]) << rank << " " << id;
    const RunReport &report = (*executor)->report();
    // Rank 0: a, c (f32[2]), c.bf16 (bf16[2]) and idle (f64[1]), each
    // allocated in 256 bytes; rank 1: a and b.
    EXPECT_EQ(report.heldWeightBytes, rank == 0 ? 8u + 8 + 4 + 8 : 16u);
    EXPECT_EQ(report.weightAllocationBytes, rank == 0 ? 1024u : 512u);
    EXPECT_EQ(report.inPlaceWeightBytes, 0u);
    ASSERT_TRUE((*executor)->setInput("x", floats({10, 20})).isOk());
    ASSERT_TRUE((*executor)->run().isOk());
    EXPECT_EQ(report.measuredPeakBytes,
              report.measuredArenaBytes + report.weightAllocationBytes);
  }

  // Rank 1 does not hold rank 0's "c": setting it is an error, and it
  // reads as the plan's initial value.
  auto rank1 = Executor::create(plan, 1);
  ASSERT_TRUE(rank1.isOk());
  Status status = (*rank1)->setWeight(3, floats({5, 6}));
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(),
            "rank 1 does not hold weight 'c': its program does not use it");
  EXPECT_EQ(valuesOf((*rank1)->weight(3)), (std::vector<float>{1, 2}));
  // Setting a weight it holds still works.
  EXPECT_TRUE((*rank1)->setWeight(1, floats({5, 6})).isOk());
  EXPECT_EQ(valuesOf((*rank1)->weight(1)), (std::vector<float>{5, 6}));
}

TEST(CheckpointTest, IndexTextRoundTrips) {
  std::shared_ptr<Plan> plan = twoRankPlan();
  CheckpointIndex index = makeCheckpointIndex(*plan, 7);
  std::string text = formatCheckpointIndex(index);
  EXPECT_EQ(text, kIndex);
  StatusOr<CheckpointIndex> parsed = parseCheckpointIndex(text, "index");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->step, 7);
  EXPECT_EQ(parsed->rankFiles, index.rankFiles);
  ASSERT_EQ(parsed->weights.size(), index.weights.size());
  for (size_t i = 0; i < index.weights.size(); ++i) {
    EXPECT_EQ(parsed->weights[i].name, index.weights[i].name);
    EXPECT_EQ(parsed->weights[i].dtype, index.weights[i].dtype);
    EXPECT_EQ(parsed->weights[i].shape, index.weights[i].shape);
    EXPECT_EQ(parsed->weights[i].ranks, index.weights[i].ranks);
  }
  EXPECT_EQ(formatCheckpointIndex(*parsed), text);
  // Names may hold spaces; scalars have the shape [].
  CheckpointIndex odd;
  odd.rankFiles = {"rank0.ckpt"};
  odd.weights.push_back({"a name with spaces", DType::F64, {}, {0}});
  StatusOr<CheckpointIndex> back =
      parseCheckpointIndex(formatCheckpointIndex(odd), "index");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->weights[0].name, "a name with spaces");
  EXPECT_TRUE(back->weights[0].shape.empty());
}

TEST(CheckpointTest, CorruptIndexes) {
  auto replaced = [](std::string text, const std::string &from,
                     const std::string &to) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::string &valid = kIndex;
  EXPECT_EQ(indexError(valid), "");
  EXPECT_EQ(indexError(""), "ck/index: not a loom checkpoint index (empty)");
  EXPECT_EQ(indexError("PK\x03\x04\n"),
            "ck/index: not a loom checkpoint index (bad magic)");
  EXPECT_EQ(indexError(replaced(valid, "checkpoint 3", "checkpoint 4")),
            "ck/index: checkpoint format 'loom-checkpoint 4' is not one this "
            "runtime reads ('loom-checkpoint 3')");
  // Version 2 (whole tensors) still reads, without slices.
  std::string version2 = replaced(valid, "checkpoint 3", "checkpoint 2");
  EXPECT_EQ(indexError(version2), "");
  EXPECT_EQ(
      indexError(replaced(version2, "[2] 1 b", "[2] slice [0] of [4] 1 b")),
      "ck/index: not a loom checkpoint index (bad weight line "
      "'weight f32 [2] slice [0] of [4] 1 b')");
  // Slices: offsets and a shape of the weight's rank, then the holders.
  EXPECT_EQ(indexError(replaced(valid, "[2] 1 b", "[2] slice [0] of [4] 1 b")),
            "");
  for (const char *slice :
       {"slice [0] af [4]", "slice [0,0] of [4]", "slice [0] of [4,1]",
        "slice [x] of [4]", "slice [0] of", "slice"})
    EXPECT_EQ(indexError(replaced(valid, "[2] 1 b",
                                  "[2] " + std::string(slice) + " 1 b")),
              "ck/index: not a loom checkpoint index (bad weight line "
              "'weight f32 [2] " +
                  std::string(slice) + " 1 b')");
  EXPECT_EQ(indexError(replaced(valid, "[2] 1 b\nweight f32 [2] 0 c",
                                "[2] slice [0] of [4] 1 b\nweight f32 [2] "
                                "slice [0] of [4] 0 b")),
            "ck/index: not a loom checkpoint index ('b' slice [0] of [4] "
            "twice)");
  EXPECT_EQ(indexError(replaced(valid, "step 7", "step -1")),
            "ck/index: not a loom checkpoint index (bad step line)");
  EXPECT_EQ(indexError(replaced(valid, "ranks 2", "ranks 0")),
            "ck/index: not a loom checkpoint index (bad ranks line)");
  EXPECT_EQ(indexError(replaced(valid, "rank 1 rank1.ckpt", "rank 2 x")),
            "ck/index: not a loom checkpoint index (expected 'rank 1 FILE', "
            "got 'rank 2 x')");
  EXPECT_EQ(indexError(replaced(valid, "rank1.ckpt", "../rank1.ckpt")),
            "ck/index: not a loom checkpoint index (expected 'rank 1 FILE', "
            "got 'rank 1 ../rank1.ckpt')");
  // Holders are increasing ranks of the checkpoint.
  for (const char *holders : {"0,2", "1,0", "0,0", "", "0,", "x"})
    EXPECT_EQ(indexError(replaced(valid, "0,1 a", std::string(holders) + " a")),
              "ck/index: not a loom checkpoint index (bad weight line "
              "'weight f32 [2] " +
                  std::string(holders) + " a')");
  EXPECT_EQ(indexError(replaced(valid, "f32 [2] 1 b", "f33 [2] 1 b")),
            "ck/index: not a loom checkpoint index (bad weight line "
            "'weight f33 [2] 1 b')");
  EXPECT_EQ(indexError(replaced(valid, "f32 [2] 1 b", "f32 [2,] 1 b")),
            "ck/index: not a loom checkpoint index (bad weight line "
            "'weight f32 [2,] 1 b')");
  EXPECT_EQ(indexError(replaced(valid, "1 b\n", "1 a\n")),
            "ck/index: not a loom checkpoint index ('a' twice)");
  EXPECT_EQ(indexError(valid.substr(0, valid.size() - 5)),
            "ck/index: not a loom checkpoint index (truncated)");
  EXPECT_EQ(indexError(valid + "extra\n"),
            "ck/index: not a loom checkpoint index (text after the last "
            "weight)");
}

TEST(CheckpointTest, IndexMustMatchThePlan) {
  std::shared_ptr<Plan> plan = twoRankPlan();
  CheckpointIndex index = makeCheckpointIndex(*plan, 3);
  EXPECT_TRUE(checkCheckpointMatches(index, *plan, "ck").isOk());
  auto error = [&](const CheckpointIndex &changed) {
    return checkCheckpointMatches(changed, *plan, "ck").message();
  };
  // Another rank count or placement is another layout, which loading
  // reshards.
  CheckpointIndex other = index;
  other.rankFiles.pop_back();
  EXPECT_TRUE(checkCheckpointMatches(other, *plan, "ck").isOk());
  EXPECT_TRUE(checkpointNeedsResharding(other, *plan));
  EXPECT_FALSE(checkpointNeedsResharding(index, *plan));
  other = index;
  other.weights[1].name = "beta";
  EXPECT_EQ(error(other), "checkpoint ck was written for another model or "
                          "optimizer: it holds 'beta', which this model lacks");
  other = index;
  other.weights[1].shape = {3};
  EXPECT_EQ(error(other), "checkpoint ck was written for another model or "
                          "optimizer: 'b' is f32[3] there but f32[2] here");
  other = index;
  other.weights.pop_back();
  EXPECT_EQ(error(other),
            "checkpoint ck was written for another model or optimizer: it "
            "holds 3 state tensors, this model and optimizer 4");
  other = index;
  other.weights[0].ranks = {0};
  EXPECT_TRUE(checkCheckpointMatches(other, *plan, "ck").isOk());
  EXPECT_TRUE(checkpointNeedsResharding(other, *plan));
  other.weights[0].ranks = {};
  EXPECT_EQ(error(other), "checkpoint ck does not hold all of 'a' exactly "
                          "once: its parts whole do not tile [2]");
}

//===----------------------------------------------------------------------===//
// Rank files through executors
//===----------------------------------------------------------------------===//

TEST(CheckpointTest, RankFilesRestoreTheState) {
  std::shared_ptr<Plan> plan = twoRankPlan();
  TempFolder folder("restore");
  const std::string &dir = folder.path;
  // Two steps of each rank (no communication: each its own executor).
  std::vector<std::unique_ptr<Executor>> trained;
  for (int rank = 0; rank < 2; ++rank) {
    auto executor = Executor::create(plan, rank);
    ASSERT_TRUE(executor.isOk()) << executor.status().message();
    ASSERT_TRUE((*executor)->setInput("x", floats({10, 20})).isOk());
    ASSERT_TRUE((*executor)->run().isOk());
    ASSERT_TRUE((*executor)->run().isOk());
    ASSERT_TRUE(writeRankCheckpoint(dir + "/" + rankCheckpointFile(rank), *plan,
                                    **executor, rank, 2)
                    .isOk());
    trained.push_back(std::move(*executor));
  }
  ASSERT_TRUE(
      writeFileAtomically(dir + "/index",
                          formatCheckpointIndex(makeCheckpointIndex(*plan, 2)))
          .isOk());
  StatusOr<std::string> rank1 = readFile(dir + "/rank1.ckpt");
  ASSERT_TRUE(rank1.isOk());
  EXPECT_EQ(rank1->substr(0, rank1->find("data ")),
            "loom-checkpoint-rank 2\nrank 1\nstep 2\nweights 2\n"
            "weight f32 [2] 8 a\nweight f32 [2] 8 b\n");

  StatusOr<CheckpointIndex> index = readCheckpointIndex(dir);
  ASSERT_TRUE(index.isOk()) << index.status().message();
  ASSERT_TRUE(checkCheckpointMatches(*index, *plan, dir).isOk());
  for (int rank = 0; rank < 2; ++rank) {
    auto fresh = Executor::create(plan, rank);
    ASSERT_TRUE(fresh.isOk());
    Status loaded = loadRankCheckpoint(dir, *index, *plan, rank, **fresh);
    ASSERT_TRUE(loaded.isOk()) << loaded.message();
    for (size_t id : rankStateWeights(*plan, rank))
      EXPECT_EQ((*fresh)->weight(id).data, trained[rank]->weight(id).data)
          << "rank " << rank << " weight " << plan->weights[id].name;
  }
  // Rank 0 trained "a" to 1 + 2 * 10; rank 1 to 1 + 2 * 10 too.
  EXPECT_EQ(valuesOf(trained[0]->weight(0)), (std::vector<float>{21, 42}));
  EXPECT_EQ(valuesOf(trained[1]->weight(1)), (std::vector<float>{21, 42}));
  // A rank file of version 1 (before slices) still loads.
  StatusOr<std::string> current = readFile(dir + "/rank1.ckpt");
  ASSERT_TRUE(current.isOk());
  std::string magic = "loom-checkpoint-rank 2";
  ASSERT_EQ(current->substr(0, magic.size()), magic);
  writeText(dir + "/rank1.ckpt",
            "loom-checkpoint-rank 1" + current->substr(magic.size()));
  auto fresh = Executor::create(plan, 1);
  ASSERT_TRUE(fresh.isOk());
  Status loaded = loadRankCheckpoint(dir, *index, *plan, 1, **fresh);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();
  EXPECT_EQ(valuesOf((*fresh)->weight(1)), (std::vector<float>{21, 42}));
}

TEST(CheckpointTest, InconsistentRankFilesAreRefused) {
  std::shared_ptr<Plan> plan = twoRankPlan();
  TempFolder folder("inconsistent");
  const std::string &dir = folder.path;
  auto executor = Executor::create(plan, 1);
  ASSERT_TRUE(executor.isOk());
  CheckpointIndex index = makeCheckpointIndex(*plan, 4);
  auto load = [&] {
    return loadRankCheckpoint(dir, index, *plan, 1, **executor).message();
  };
  EXPECT_EQ(load(), "cannot open '" + dir +
                        "/rank1.ckpt': No such file or "
                        "directory");
  // A file of the step after the index's: the write was interrupted.
  std::string path = dir + "/rank1.ckpt";
  ASSERT_TRUE(writeRankCheckpoint(path, *plan, **executor, 1, 5).isOk());
  EXPECT_EQ(load(), "checkpoint " + dir + " is inconsistent: " + path +
                        " is at step 5, the index at step 4 (was it "
                        "interrupted while being written?)");
  // Another rank's file.
  ASSERT_TRUE(writeRankCheckpoint(path, *plan, **executor, 0, 4).isOk());
  EXPECT_EQ(load(), "checkpoint " + dir + " is inconsistent: " + path +
                        " is rank 0's, not 1's");
  // Truncated.
  ASSERT_TRUE(writeRankCheckpoint(path, *plan, **executor, 1, 4).isOk());
  EXPECT_EQ(load(), "");
  StatusOr<std::string> bytes = readFile(path);
  ASSERT_TRUE(bytes.isOk());
  writeText(path, bytes->substr(0, bytes->size() - 1));
  EXPECT_EQ(load(), path + ": not a loom checkpoint (bad or truncated data "
                           "section)");
  // Laid out otherwise (the index places "c" on rank 1 only), rank 1's
  // parts are read from the files of the ranks that hold them, which are
  // checked as well.
  index.weights[2].ranks = {1}; // "c"
  writeText(path, *bytes);
  ASSERT_TRUE(
      writeRankCheckpoint(dir + "/rank0.ckpt", *plan, **executor, 0, 5).isOk());
  EXPECT_EQ(load(), "checkpoint " + dir + " is inconsistent: " + dir +
                        "/rank0.ckpt is at step 5, the index at step 4 (was "
                        "it interrupted while being written?)");
}

TEST(CheckpointTest, VersionOneCheckpointsLoad) {
  // Before the index, a checkpoint was DIR/state.ckpt for one rank.
  auto plan = std::make_shared<Plan>();
  plan->weights.push_back(weight("w", {2}, 0, true));
  plan->data.resize(8);
  RankProgram &rank = plan->ranks.emplace_back();
  rank.arenaBytes = 64;
  rank.instructions.push_back(accumulate(weightRef(0, {2}), arena(0, {2})));
  TempFolder folder("legacy");
  const std::string &dir = folder.path;
  float values[] = {3, 4};
  writeText(dir + "/state.ckpt",
            "loom-checkpoint 1\nstep 9\nweights 1\nweight f32 [2] 8 w\n"
            "data 8\n" +
                std::string(reinterpret_cast<const char *>(values), 8));
  StatusOr<CheckpointIndex> index = readCheckpointIndex(dir);
  ASSERT_TRUE(index.isOk()) << index.status().message();
  EXPECT_EQ(index->step, 9);
  ASSERT_TRUE(checkCheckpointMatches(*index, *plan, dir).isOk());
  auto executor = Executor::create(plan);
  ASSERT_TRUE(executor.isOk());
  Status loaded = loadRankCheckpoint(dir, *index, *plan, 0, **executor);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();
  EXPECT_EQ(valuesOf((*executor)->weight(0)), (std::vector<float>{3, 4}));
  // No checkpoint at all: the index is what is missing.
  TempFolder emptyFolder("empty");
  const std::string &empty = emptyFolder.path;
  EXPECT_EQ(readCheckpointIndex(empty).status().message(),
            "cannot open '" + empty + "/index': No such file or directory");
}

TEST(CheckpointTest, NpyFileNames) {
  EXPECT_EQ(npyFileName("net.0.weight"), "net.0.weight.npy");
  EXPECT_EQ(npyFileName("/h.0/attn w"), "%2Fh.0%2Fattn%20w.npy");
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

TEST(LauncherTest, AFailingRankStopsTheOthers) {
  // Rank 1 fails at once; ranks 0 and 2 wait in a barrier that rank 1
  // never joins. They must stop with rank 1's message, long before the
  // timeout.
  LaunchOptions options;
  options.model = "m.plan";
  options.threadRanks = 3;
  options.comm.timeout = std::chrono::seconds(30);
  auto start = std::chrono::steady_clock::now();
  StatusOr<LaunchResult> result =
      launchRanks(3, options, [](RankContext &context) -> Status {
        EXPECT_EQ(context.size, 3);
        EXPECT_FALSE(context.processPerRank);
        EXPECT_EQ(context.prefix(),
                  "rank " + std::to_string(context.rank) + ": ");
        if (context.rank == 1)
          return Status::error("no data");
        return barrier(context);
      });
  ASSERT_TRUE(result.isOk()) << result.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(result->ok());
  ASSERT_EQ(result->outcomes.size(), 3u);
  EXPECT_EQ(result->outcomes[1].status.message(), "no data");
  for (int rank : {0, 2}) {
    EXPECT_EQ(result->outcomes[rank].rank, rank);
    EXPECT_NE(
        result->outcomes[rank].status.message().find("rank 1 failed: no data"),
        std::string::npos)
        << result->outcomes[rank].status.message();
  }
}

TEST(LauncherTest, ADeadRankIsNoticedByTimeout) {
  // A rank that dies (the --test-kill-rank hook) does not tell the others:
  // they find out through the communication timeout.
  LaunchOptions options;
  options.model = "m.plan";
  options.threadRanks = 2;
  options.comm.timeout = std::chrono::milliseconds(200);
  StatusOr<LaunchResult> result =
      launchRanks(2, options, [](RankContext &context) -> Status {
        if (context.rank == 1) {
          context.died = true;
          return Status::error("killed");
        }
        return barrier(context);
      });
  ASSERT_TRUE(result.isOk());
  EXPECT_TRUE(result->outcomes[1].died);
  EXPECT_NE(result->outcomes[0].status.message().find("timed out after 200 ms"),
            std::string::npos)
      << result->outcomes[0].status.message();
}

#ifdef __linux__
/// The CPUs the calling thread may run on.
std::vector<int> threadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set))
        cpus.push_back(cpu);
  return cpus;
}

TEST(LauncherTest, ThreadRanksRunOnCpusOfTheirOwn) {
  // With one OpenMP thread per rank and a CPU for each, every rank's
  // thread is pinned to a CPU no other rank has; LOOM_PIN_RANKS=0 leaves
  // them where the process may run.
  const std::vector<int> allowed = threadCpus();
  if (allowed.size() < 2)
    GTEST_SKIP() << "needs two CPUs";
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  auto cpusOfRanks = [] {
    std::vector<std::vector<int>> cpus(2);
    LaunchOptions options;
    options.threadRanks = 2;
    StatusOr<LaunchResult> result =
        launchRanks(2, options, [&](RankContext &context) -> Status {
          cpus[size_t(context.rank)] = threadCpus();
          return barrier(context);
        });
    EXPECT_TRUE(result.isOk() && result->ok());
    return cpus;
  };
  std::vector<std::vector<int>> pinned = cpusOfRanks();
  ASSERT_EQ(pinned[0].size(), 1u);
  ASSERT_EQ(pinned[1].size(), 1u);
  EXPECT_NE(pinned[0][0], pinned[1][0]);
  setenv("LOOM_PIN_RANKS", "0", 1);
  std::vector<std::vector<int>> free = cpusOfRanks();
  unsetenv("LOOM_PIN_RANKS");
  EXPECT_EQ(free[0], allowed);
  EXPECT_EQ(free[1], allowed);
  omp_set_num_threads(threads);
}
#endif

TEST(LauncherTest, RanksSucceedTogether) {
  LaunchOptions options;
  options.threadRanks = 4;
  std::atomic<int> ran{0};
  StatusOr<LaunchResult> result =
      launchRanks(4, options, [&](RankContext &context) -> Status {
        ++ran;
        EXPECT_TRUE(context.world != nullptr);
        EXPECT_TRUE(context.host != nullptr);
        if (Status status = barrier(context); !status)
          return status;
        return barrier(context);
      });
  ASSERT_TRUE(result.isOk());
  EXPECT_TRUE(result->ok());
  EXPECT_EQ(ran.load(), 4);
  // One rank runs in the caller's thread, with no prefix.
  options.threadRanks = 0;
  result = launchRanks(1, options, [](RankContext &context) -> Status {
    EXPECT_EQ(context.prefix(), "");
    return barrier(context);
  });
  ASSERT_TRUE(result.isOk());
  EXPECT_TRUE(result->ok());
}

TEST(LauncherTest, RankCountErrors) {
  LaunchOptions options;
  options.model = "m.plan";
  auto body = [](RankContext &) { return Status::ok(); };
  options.threadRanks = 3;
  EXPECT_EQ(launchRanks(2, options, body).status().message(),
            "--ranks 3, but m.plan is a plan for 2 rank(s)");
  options.threadRanks = 0;
  if (!launchedByMPI()) {
    EXPECT_EQ(launchRanks(2, options, body).status().message(),
              "m.plan is a plan for 2 ranks: run it with --ranks 2 (threads) "
              "or under mpirun -np 2");
  }
  // Ranks keep their own tuning files.
  options.threadRanks = 2;
  options.executor.cuda.tuningFile = "shared.tuning";
  StatusOr<LaunchResult> shared = launchRanks(2, options, body);
  ASSERT_TRUE(shared.isOk());
  EXPECT_EQ(shared->outcomes[0].status.message(),
            "--tuning-file: the plan has 2 ranks; put {rank} in the file's "
            "name, so that each keeps its own");
  options.executor.cuda.tuningFile = "own{rank}.tuning";
  std::vector<std::string> files(2);
  StatusOr<LaunchResult> own =
      launchRanks(2, options, [&](RankContext &context) {
        files[context.rank] = context.executor.cuda.tuningFile;
        return Status::ok();
      });
  ASSERT_TRUE(own.isOk());
  EXPECT_EQ(files, (std::vector<std::string>{"own0.tuning", "own1.tuning"}));
  EXPECT_EQ(substituteRank("x{rank}-{rank}.npy", 12), "x12-12.npy");
}

//===----------------------------------------------------------------------===//
// Training on several ranks
//===----------------------------------------------------------------------===//

namespace {

/// Two ranks splitting a batch of 2 rows: rank 0 adds its row (rows=0) to
/// "a" and counts its steps in "count", its `loss` output; rank 1 adds its
/// row (rows=1) to "a" and to "b". So each rank's "a" is its own, "b" is
/// rank 1's only, and the loss after step i is i + 1.
std::shared_ptr<Plan> splitBatchPlan() {
  auto plan = std::make_shared<Plan>();
  plan->weights.push_back(weight("a", {1, 2}, 0, true));
  plan->weights.push_back(weight("b", {1, 2}, 64, true));
  plan->weights.push_back(weight("count", {}, 128, true));
  plan->data.resize(192);
  float values[] = {1, 2};
  std::memcpy(plan->data.data(), values, 8);
  std::memcpy(plan->data.data() + 64, values, 8);

  Instruction count;
  count.kernel = "elementwise";
  count.inputs = {weightRef(2, {})};
  count.outputs = {weightRef(2, {})};
  ProgramOp one;
  one.op = "const";
  one.attrs["value"] = 1.0;
  ProgramOp add;
  add.op = "add";
  add.operands = {0, 1};
  count.program = {one, add};
  count.yields = {2};

  RankProgram &rank0 = plan->ranks.emplace_back();
  rank0.rank = 0;
  rank0.arenaBytes = 64;
  rank0.inputs.push_back({"x", arena(0, {1, 2}), 0});
  rank0.outputs.push_back({"loss", weightRef(2, {})});
  rank0.instructions.push_back(
      accumulate(weightRef(0, {1, 2}), arena(0, {1, 2})));
  rank0.instructions.push_back(count);
  RankProgram &rank1 = plan->ranks.emplace_back();
  rank1.rank = 1;
  rank1.arenaBytes = 64;
  rank1.inputs.push_back({"x", arena(0, {1, 2}), 1});
  rank1.instructions.push_back(
      accumulate(weightRef(0, {1, 2}), arena(0, {1, 2})));
  rank1.instructions.push_back(
      accumulate(weightRef(1, {1, 2}), arena(0, {1, 2})));
  return plan;
}

Dataset twoSamples() {
  Dataset data;
  HostTensor x = floats({1, 2, 10, 20});
  x.shape = {2, 2};
  data.named.push_back({"x", x});
  return data;
}

TrainOptions twoRankOptions() {
  TrainOptions options;
  options.batchSize = 2;
  options.steps = 3;
  options.loss = "none";
  options.launch.model = "split.plan";
  options.launch.threadRanks = 2;
  return options;
}

std::vector<float> npyValues(const std::string &path) {
  StatusOr<HostTensor> tensor = readTensorFile(path);
  EXPECT_TRUE(tensor.isOk()) << tensor.status().message();
  return tensor.isOk() ? valuesOf(*tensor) : std::vector<float>();
}

} // namespace

TEST(TrainerTest, RanksReadTheirRowsAndTheLowestHolderSaves) {
  std::shared_ptr<Plan> plan = splitBatchPlan();
  Dataset data = twoSamples();
  TempFolder folder("train");
  TrainOptions options = twoRankOptions();
  options.metricsPath = folder.path + "/metrics.jsonl";
  options.saveWeightsDir = folder.path + "/weights";
  options.savePath = folder.path + "/model.onnx";
  std::map<std::string, HostTensor> saved;
  int calls = 0;
  options.saveModel =
      [&](const std::map<std::string, HostTensor> &values) -> StatusOr<size_t> {
    ++calls;
    saved = values;
    return values.size();
  };
  std::vector<RankReport> reports;
  ASSERT_EQ(runTraining(plan, data, options, reports), 0);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].rank, 1);
  // The loss is rank 0's `loss` output: 1, 2, 3.
  StatusOr<std::string> metrics = readFile(options.metricsPath);
  ASSERT_TRUE(metrics.isOk());
  EXPECT_NE(metrics->find("{\"step\": 2, \"loss\": 3,"), std::string::npos)
      << *metrics;
  // "a" from rank 0 (its row, sample 0, three times), "b" from rank 1 (its
  // row, sample 1), gathered to rank 0 for --save.
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(valuesOf(saved["a"]), (std::vector<float>{4, 8}));
  EXPECT_EQ(valuesOf(saved["b"]), (std::vector<float>{31, 62}));
  EXPECT_EQ(npyValues(options.saveWeightsDir + "/a.npy"),
            (std::vector<float>{4, 8}));
  EXPECT_EQ(npyValues(options.saveWeightsDir + "/b.npy"),
            (std::vector<float>{31, 62}));
}

TEST(TrainerTest, CheckpointsResumeEveryRank) {
  std::shared_ptr<Plan> plan = splitBatchPlan();
  Dataset data = twoSamples();
  TempFolder folder("resume");
  std::vector<RankReport> reports;
  TrainOptions first = twoRankOptions();
  first.steps = 2;
  first.checkpointDir = folder.path + "/ckpt";
  ASSERT_EQ(runTraining(plan, data, first, reports), 0);
  StatusOr<std::string> index = readFile(first.checkpointDir + "/index");
  ASSERT_TRUE(index.isOk());
  EXPECT_EQ(*index, "loom-checkpoint 3\nstep 2\nranks 2\nrank 0 rank0.ckpt\n"
                    "rank 1 rank1.ckpt\nweights 3\nweight f32 [1,2] 0,1 a\n"
                    "weight f32 [1,2] 1 b\nweight f32 [] 0 count\n");
  TrainOptions second = twoRankOptions();
  second.resumeDir = first.checkpointDir;
  second.saveWeightsDir = folder.path + "/weights";
  ASSERT_EQ(runTraining(plan, data, second, reports), 0);
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/a.npy"),
            (std::vector<float>{4, 8}));
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/b.npy"),
            (std::vector<float>{31, 62}));
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/count.npy"),
            (std::vector<float>{3}));
  // Nothing left to do.
  TrainOptions done = twoRankOptions();
  done.steps = 2;
  done.resumeDir = first.checkpointDir;
  EXPECT_EQ(runTraining(plan, data, done, reports), 1);
}

TEST(TrainerTest, RowsBeyondTheBatchAreRefusedBeforeAnyStep) {
  std::shared_ptr<Plan> plan = splitBatchPlan();
  Dataset data = twoSamples();
  TrainOptions options = twoRankOptions();
  options.batchSize = 1;
  int calls = 0;
  options.launch.threadRanks = 2;
  options.saveModel =
      [&](const std::map<std::string, HostTensor> &) -> StatusOr<size_t> {
    return ++calls;
  };
  options.savePath = "never.onnx";
  std::vector<RankReport> reports;
  testing::internal::CaptureStderr();
  EXPECT_EQ(runTraining(plan, data, options, reports), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: rank 1: the plan's input 'x' reads rows [1, 2) "
            "of each step's batch, beyond --batch-size 1\n");
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(reports.empty());
}

//===----------------------------------------------------------------------===//
// Sliced (tensor-parallel) state
//===----------------------------------------------------------------------===//

namespace {

/// Two tensor-parallel ranks over a batch of one row, read whole by both:
/// "w" f32[2,2] is split by rows, rank r holding row r (a slice) and
/// adding the row of data to it; "w.bf16" is its bf16 copy, sliced alike;
/// "b" is replicated (both add the row to it); rank 0 counts the steps in
/// "count", its `loss`.
std::shared_ptr<Plan> slicedPlan() {
  auto plan = std::make_shared<Plan>();
  for (int64_t row = 0; row < 2; ++row) {
    Weight slice = weight("w", {1, 2}, 64 * row, true);
    slice.sliceOffsets = {row, 0};
    slice.globalShape = {2, 2};
    plan->weights.push_back(slice);
  }
  plan->weights.push_back(weight("b", {1, 2}, 128, true));
  plan->weights.push_back(weight("count", {}, 192, true));
  for (int64_t row = 0; row < 2; ++row) {
    Weight copy = weight("w.bf16", {1, 2}, 256 + 64 * row, true, DType::BF16);
    copy.castOf = row;
    copy.sliceOffsets = {row, 0};
    copy.globalShape = {2, 2};
    plan->weights.push_back(copy);
  }
  plan->data.resize(384);
  float values[] = {1, 2, 3, 4};
  std::memcpy(plan->data.data(), values, 8);
  std::memcpy(plan->data.data() + 64, values + 2, 8);
  std::memcpy(plan->data.data() + 128, values, 8);

  Instruction count;
  count.kernel = "elementwise";
  count.inputs = {weightRef(3, {})};
  count.outputs = {weightRef(3, {})};
  ProgramOp one;
  one.op = "const";
  one.attrs["value"] = 1.0;
  ProgramOp add;
  add.op = "add";
  add.operands = {0, 1};
  count.program = {one, add};
  count.yields = {2};
  for (int rank = 0; rank < 2; ++rank) {
    RankProgram &program = plan->ranks.emplace_back();
    program.rank = rank;
    program.arenaBytes = 64;
    program.inputs.push_back({"x", arena(0, {1, 2})});
    program.outputs.push_back(
        {"copy", weightRef(4 + rank, {1, 2}, DType::BF16)});
    if (rank == 0)
      program.outputs.push_back({"loss", weightRef(3, {})});
    program.instructions.push_back(
        accumulate(weightRef(rank, {1, 2}), arena(0, {1, 2})));
    program.instructions.push_back(
        accumulate(weightRef(2, {1, 2}), arena(0, {1, 2})));
    if (rank == 0)
      program.instructions.push_back(count);
  }
  return plan;
}

TrainOptions slicedOptions() {
  TrainOptions options = twoRankOptions();
  options.batchSize = 1;
  return options;
}

const std::string kSlicedIndex =
    "loom-checkpoint 3\nstep 2\nranks 2\nrank 0 rank0.ckpt\n"
    "rank 1 rank1.ckpt\nweights 4\n"
    "weight f32 [1,2] slice [0,0] of [2,2] 0 w\n"
    "weight f32 [1,2] slice [1,0] of [2,2] 1 w\n"
    "weight f32 [1,2] 0,1 b\n"
    "weight f32 [] 0 count\n";

} // namespace

TEST(TrainerTest, SlicesAreSavedWhole) {
  std::shared_ptr<Plan> plan = slicedPlan();
  ASSERT_TRUE(checkWeightSlices(*plan).isOk());
  Dataset data = twoSamples();
  TempFolder folder("sliced");
  TrainOptions options = slicedOptions();
  options.saveWeightsDir = folder.path + "/weights";
  options.savePath = folder.path + "/model.onnx";
  std::map<std::string, HostTensor> saved;
  options.saveModel =
      [&](const std::map<std::string, HostTensor> &values) -> StatusOr<size_t> {
    saved = values;
    return values.size();
  };
  std::vector<RankReport> reports;
  testing::internal::CaptureStdout();
  ASSERT_EQ(runTraining(plan, data, options, reports), 0);
  std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("saved 4 state weights to "), std::string::npos)
      << printed;
  // Samples 0, 1, 0 were added: row 0 of "w" on rank 0, row 1 on rank 1.
  std::vector<float> w = {1 + 12, 2 + 24, 3 + 12, 4 + 24};
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved["w"].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(valuesOf(saved["w"]), w);
  EXPECT_EQ(saved["w.bf16"].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(saved["w.bf16"].dtype, DType::BF16);
  EXPECT_EQ(valuesOf(saved["b"]), (std::vector<float>{13, 26}));
  StatusOr<HostTensor> npy = readTensorFile(options.saveWeightsDir + "/w.npy");
  ASSERT_TRUE(npy.isOk()) << npy.status().message();
  EXPECT_EQ(npy->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(valuesOf(*npy), w);
  // The copies were derived from the first values of their slices (no
  // kernel writes them here), and are gathered the same way.
  EXPECT_EQ(npyValues(options.saveWeightsDir + "/w.bf16.npy"),
            (std::vector<float>{1, 2, 3, 4}));
}

TEST(TrainerTest, SlicedCheckpointsResume) {
  std::shared_ptr<Plan> plan = slicedPlan();
  Dataset data = twoSamples();
  TempFolder folder("sliced-resume");
  std::vector<RankReport> reports;
  TrainOptions first = slicedOptions();
  first.steps = 2;
  first.checkpointDir = folder.path + "/ckpt";
  ASSERT_EQ(runTraining(plan, data, first, reports), 0);
  StatusOr<std::string> index = readFile(first.checkpointDir + "/index");
  ASSERT_TRUE(index.isOk());
  EXPECT_EQ(*index, kSlicedIndex);
  StatusOr<std::string> rank1 = readFile(first.checkpointDir + "/rank1.ckpt");
  ASSERT_TRUE(rank1.isOk());
  EXPECT_EQ(rank1->substr(0, rank1->find("data ")),
            "loom-checkpoint-rank 2\nrank 1\nstep 2\nweights 2\n"
            "weight f32 [1,2] slice [1,0] of [2,2] 8 w\n"
            "weight f32 [1,2] 8 b\n");
  TrainOptions second = slicedOptions();
  second.resumeDir = first.checkpointDir;
  second.saveWeightsDir = folder.path + "/weights";
  ASSERT_EQ(runTraining(plan, data, second, reports), 0);
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/w.npy"),
            (std::vector<float>{13, 26, 15, 28}));
  // A checkpoint holds no copies: the resumed copy is derived from the
  // restored slices of "w" (after step 2; no kernel writes it here).
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/w.bf16.npy"),
            (std::vector<float>{12, 24, 14, 26}));
  EXPECT_EQ(npyValues(second.saveWeightsDir + "/count.npy"),
            (std::vector<float>{3}));
}

/// A plan holding the tensors of slicedPlan() ("w" [2,2] with its bf16
/// copy, "b" [1,2], "count") cut otherwise: "w" and its copy in `parts`
/// (offsets and shape; part i on rank i, whole when one part has no
/// offsets), "b" and "count" on rank 0.
std::shared_ptr<Plan> relaidPlan(
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
        &parts) {
  auto plan = std::make_shared<Plan>();
  uint64_t offset = 0;
  for (const auto &[offsets, shape] : parts) {
    Weight slice = weight("w", shape, offset, true);
    if (!offsets.empty()) {
      slice.sliceOffsets = offsets;
      slice.globalShape = {2, 2};
    }
    plan->weights.push_back(slice);
    offset += 64;
  }
  size_t b = plan->weights.size();
  plan->weights.push_back(weight("b", {1, 2}, offset, true));
  plan->weights.push_back(weight("count", {}, offset + 64, true));
  offset += 128;
  for (size_t i = 0; i < parts.size(); ++i) {
    Weight copy = weight("w.bf16", parts[i].second, offset, true, DType::BF16);
    copy.castOf = int64_t(i);
    copy.sliceOffsets = plan->weights[i].sliceOffsets;
    copy.globalShape = plan->weights[i].globalShape;
    plan->weights.push_back(copy);
    offset += 64;
  }
  plan->data.resize(offset);
  for (size_t rank = 0; rank < parts.size(); ++rank) {
    RankProgram &program = plan->ranks.emplace_back();
    program.rank = int(rank);
    program.arenaBytes = 64;
    program.instructions.push_back(accumulate(
        weightRef(rank, parts[rank].second), arena(0, parts[rank].second)));
    if (rank == 0) {
      program.instructions.push_back(
          accumulate(weightRef(b, {1, 2}), arena(0, {1, 2})));
      program.instructions.push_back(
          accumulate(weightRef(b + 1, {}), arena(0, {})));
    }
  }
  return plan;
}

TEST(CheckpointTest, LoadsUnderAnotherLayout) {
  // A checkpoint of slicedPlan() (w by rows on 2 ranks, b on both) loads
  // into plans that cut and place the same tensors otherwise: each rank's
  // weights are assembled from the parts that overlap them.
  std::shared_ptr<Plan> plan = slicedPlan();
  Dataset data = twoSamples();
  TempFolder folder("relaid");
  std::vector<RankReport> reports;
  TrainOptions first = slicedOptions();
  first.steps = 2;
  first.checkpointDir = folder.path + "/ckpt";
  first.saveWeightsDir = folder.path + "/weights";
  ASSERT_EQ(runTraining(plan, data, first, reports), 0);
  std::vector<float> w = npyValues(first.saveWeightsDir + "/w.npy");
  std::vector<float> b = npyValues(first.saveWeightsDir + "/b.npy");
  ASSERT_EQ(w.size(), 4u);
  StatusOr<CheckpointIndex> index = readCheckpointIndex(first.checkpointDir);
  ASSERT_TRUE(index.isOk()) << index.status().message();
  EXPECT_FALSE(checkpointNeedsResharding(*index, *plan));

  struct Layout {
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> parts;
    std::vector<std::vector<float>> expected;
  };
  std::vector<Layout> layouts = {
      {{{{}, {2, 2}}}, {w}},                 // one rank, whole
      {{{{0, 0}, {2, 1}}, {{0, 1}, {2, 1}}}, // by columns
       {{w[0], w[2]}, {w[1], w[3]}}},
      {{{{0, 0}, {2, 2}}, {{2, 0}, {0, 2}}}, {w, {}}}, // uneven
      {{{{1, 0}, {1, 2}}, {{0, 0}, {1, 2}}},           // rows swapped
       {{w[2], w[3]}, {w[0], w[1]}}}};
  for (const Layout &layout : layouts) {
    std::shared_ptr<Plan> relaid = relaidPlan(layout.parts);
    Status matches = checkCheckpointMatches(*index, *relaid, "ck");
    ASSERT_TRUE(matches.isOk()) << matches.message();
    EXPECT_TRUE(checkpointNeedsResharding(*index, *relaid));
    for (size_t rank = 0; rank < layout.parts.size(); ++rank) {
      auto executor = Executor::create(relaid, int(rank));
      ASSERT_TRUE(executor.isOk()) << executor.status().message();
      Status loaded = loadRankCheckpoint(first.checkpointDir, *index, *relaid,
                                         int(rank), **executor);
      ASSERT_TRUE(loaded.isOk()) << loaded.message();
      EXPECT_EQ(valuesOf((*executor)->weight(rank)), layout.expected[rank])
          << "rank " << rank;
      if (rank == 0) {
        EXPECT_EQ(valuesOf((*executor)->weight(layout.parts.size())), b);
        EXPECT_EQ(valuesOf((*executor)->weight(layout.parts.size() + 1)),
                  (std::vector<float>{2}));
      }
    }
  }
}

TEST(CheckpointTest, SlicesMayDifferFromThePlan) {
  std::shared_ptr<Plan> plan = slicedPlan();
  CheckpointIndex index = makeCheckpointIndex(*plan, 2);
  EXPECT_EQ(formatCheckpointIndex(index), kSlicedIndex);
  StatusOr<CheckpointIndex> parsed = parseCheckpointIndex(kSlicedIndex, "ck");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->weights[1].sliceOffsets, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(parsed->weights[1].globalShape, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(checkCheckpointMatches(*parsed, *plan, "ck").isOk());
  auto error = [&](const CheckpointIndex &changed) {
    return checkCheckpointMatches(changed, *plan, "ck").message();
  };
  // Sliced otherwise, by columns or not at all (a version 2 checkpoint):
  // another layout, which loading reshards.
  CheckpointIndex other = index;
  other.weights[0].shape = other.weights[1].shape = {2, 1};
  other.weights[1].sliceOffsets = {0, 1};
  EXPECT_TRUE(checkCheckpointMatches(other, *plan, "ck").isOk());
  EXPECT_TRUE(checkpointNeedsResharding(other, *plan));
  other = index;
  other.weights.erase(other.weights.begin() + 1);
  other.weights[0] = {"w", DType::F32, {2, 2}, {0, 1}, {}, {}};
  EXPECT_TRUE(checkCheckpointMatches(other, *plan, "ck").isOk());
  // Parts that miss some of the tensor, or hold some of it twice.
  other = index;
  other.weights.erase(other.weights.begin() + 1);
  EXPECT_EQ(error(other), "checkpoint ck does not hold all of 'w' exactly "
                          "once: its parts [1,2] at [0,0] do not tile [2,2]");
  other = index;
  other.weights[1].sliceOffsets = {0, 0};
  EXPECT_EQ(error(other), "checkpoint ck does not hold all of 'w' exactly "
                          "once: its parts [1,2] at [0,0], [1,2] at [0,0] do "
                          "not tile [2,2]");
  // Another tensor.
  other = index;
  other.weights[0].globalShape = other.weights[1].globalShape = {2, 3};
  EXPECT_EQ(error(other), "checkpoint ck was written for another model or "
                          "optimizer: 'w' is f32[2,3] there but f32[2,2] "
                          "here");
  // Placed otherwise.
  other = index;
  other.weights[1].ranks = {0};
  EXPECT_TRUE(checkCheckpointMatches(other, *plan, "ck").isOk());
  EXPECT_TRUE(checkpointNeedsResharding(other, *plan));
}
