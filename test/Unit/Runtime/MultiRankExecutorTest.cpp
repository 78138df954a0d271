//===- MultiRankExecutorTest.cpp - Executors of multi-rank plans ----------===//
//
// Ranks as threads on the threads communicator: collectives and transfers
// in plans, the executor's waits for communication still in flight, and a
// failing rank stopping the others.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"
#include "loom/Runtime/Executor.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <thread>

using namespace loomrt;

namespace {

HostTensor floats(std::vector<float> values) {
  HostTensor tensor;
  tensor.dtype = DType::F32;
  tensor.shape = {int64_t(values.size())};
  tensor.data.resize(values.size() * sizeof(float));
  std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

std::vector<float> values(const HostTensor &tensor) {
  std::vector<float> result(tensor.elements());
  std::memcpy(result.data(), tensor.data.data(), tensor.data.size());
  return result;
}

std::shared_ptr<const Plan> parse(const std::string &text) {
  StatusOr<Plan> plan = parsePlan(text, "test.plan");
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
  return std::make_shared<Plan>(std::move(*plan));
}

/// Runs every rank of `plan` in its own thread with input "x" = inputs[r];
/// `prepare` may install hooks, `wrap` stand in for a rank's communicator.
/// Returns each rank's status.
std::vector<Status> runRanks(
    std::shared_ptr<const Plan> plan,
    const std::vector<std::vector<float>> &inputs,
    std::vector<std::vector<float>> &outputs,
    std::function<void(Executor &, int)> prepare = nullptr,
    CommOptions options = {},
    std::function<void(Executor &, int)> finish = nullptr,
    std::function<std::shared_ptr<Communicator>(std::shared_ptr<Communicator>,
                                                int)>
        wrap = nullptr) {
  int ranks = int(plan->ranks.size());
  auto comms = createThreadCommunicators(ranks, options);
  if (wrap)
    for (int rank = 0; rank < ranks; ++rank)
      comms[rank] = wrap(comms[rank], rank);
  std::vector<Status> statuses(ranks);
  outputs.assign(ranks, {});
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      auto executor = Executor::create(plan, rank, comms[rank]);
      if (!executor) {
        statuses[rank] = executor.status();
        comms[rank]->abort(statuses[rank].message());
        return;
      }
      if (prepare)
        prepare(**executor, rank);
      if (!(*executor)->program().inputs.empty())
        if (Status status = (*executor)->setInput("x", floats(inputs[rank]));
            !status) {
          statuses[rank] = status;
          return;
        }
      statuses[rank] = (*executor)->run();
      if (statuses[rank])
        outputs[rank] = values((*executor)->output(0));
      if (statuses[rank] && finish)
        finish(**executor, rank);
    });
  for (std::thread &thread : threads)
    thread.join();
  return statuses;
}

} // namespace

TEST(MultiRankExecutorTest, CollectivesRunOnTheirGroups) {
  // 4 ranks; all_reduce over pairs {0,1} {2,3}, then all_gather over all.
  std::string rank = "arena 256\n"
                     "input \"x\" a0:f32[2]\n"
                     "output \"y\" a64:f32[8]\n"
                     "collective all_reduce a0:f32[2] -> a0:f32[2] group=G "
                     "op=sum\n"
                     "collective all_gather a0:f32[2] -> a64:f32[8] group=2\n"
                     "end\n";
  std::string text = "loom-plan 2\nweights 0\ngroups 3\ngroup 0 [0,1]\n"
                     "group 1 [2,3]\ngroup 2 [0,1,2,3]\n";
  for (int r = 0; r < 4; ++r) {
    std::string line = rank;
    line.replace(line.find("group=G"), 7, r < 2 ? "group=0" : "group=1");
    text += "rank " + std::to_string(r) + " " + line;
  }
  text += "data 0\n";
  std::vector<std::vector<float>> outputs;
  std::vector<Status> statuses = runRanks(
      parse(text), {{1, 2}, {10, 20}, {100, 200}, {1000, 2000}}, outputs);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(statuses[r].isOk()) << statuses[r].message();
    EXPECT_EQ(outputs[r],
              (std::vector<float>{11, 22, 11, 22, 1100, 2200, 1100, 2200}));
  }
}

TEST(MultiRankExecutorTest, CollectivesCountTheBytesTheySend) {
  // As they run, counted as a ring sends them (LinkModel.h): the all_reduce
  // of 8 bytes over pairs sends 2 * 1/2 * 8; the all_gather into 32 bytes
  // over 4 ranks 3/4 * 32; a send its 16 bytes, a recv nothing.
  std::string rank = "arena 256\n"
                     "input \"x\" a0:f32[2]\n"
                     "output \"y\" a64:f32[8]\n"
                     "collective all_reduce a0:f32[2] -> a0:f32[2] group=G "
                     "op=sum\n"
                     "collective all_gather a0:f32[2] -> a64:f32[8] group=2\n"
                     "collective all_reduce a0:f32[2] -> a0:f32[2] group=G "
                     "op=sum\n"
                     "end\n";
  std::string text = "loom-plan 2\nweights 0\ngroups 3\ngroup 0 [0,1]\n"
                     "group 1 [2,3]\ngroup 2 [0,1,2,3]\n";
  for (int r = 0; r < 4; ++r) {
    std::string line = rank;
    for (size_t at; (at = line.find("group=G")) != std::string::npos;)
      line.replace(at, 7, r < 2 ? "group=0" : "group=1");
    text += "rank " + std::to_string(r) + " " + line;
  }
  text += "data 0\n";
  std::vector<std::map<std::string, uint64_t>> sent(4);
  std::vector<std::vector<float>> outputs;
  std::vector<Status> statuses =
      runRanks(parse(text), {{1, 2}, {3, 4}, {5, 6}, {7, 8}}, outputs, nullptr,
               {}, [&](Executor &executor, int r) {
                 // A second run counts its own step, not the sum of both.
                 ASSERT_TRUE(executor.run().isOk());
                 sent[r] = executor.report().commBytesSent;
               });
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(statuses[r].isOk()) << statuses[r].message();
    EXPECT_EQ(sent[r], (std::map<std::string, uint64_t>{{"all_reduce", 16},
                                                        {"all_gather", 24}}));
  }

  std::string pair = "loom-plan 2\nweights 0\n"
                     "rank 0 arena 64\n"
                     "input \"x\" a0:f32[4]\n"
                     "output \"y\" a0:f32[4]\n"
                     "collective send a0:f32[4] -> peer=1 tag=0\n"
                     "end\n"
                     "rank 1 arena 64\n"
                     "output \"y\" a0:f32[4]\n"
                     "collective recv -> a0:f32[4] peer=0 tag=0\n"
                     "end\n"
                     "data 0\n";
  statuses = runRanks(parse(pair), {{1, 2, 3, 4}, {}}, outputs, nullptr, {},
                      [&](Executor &executor, int r) {
                        sent[r] = executor.report().commBytesSent;
                      });
  ASSERT_TRUE(statuses[0].isOk() && statuses[1].isOk());
  EXPECT_EQ(sent[0], (std::map<std::string, uint64_t>{{"send", 16}}));
  EXPECT_EQ(sent[1], (std::map<std::string, uint64_t>{{"recv", 0}}));
}

TEST(MultiRankExecutorTest, KernelsWaitForSendsStillInFlight) {
  // Rank 0 sends x, then negates x in place; rank 1 receives late. The
  // executor must wait for the send before the kernel overwrites its bytes.
  std::string text = "loom-plan 2\nweights 0\n"
                     "rank 0 arena 64\n"
                     "input \"x\" a0:f32[4]\n"
                     "output \"y\" a0:f32[4]\n"
                     "collective send a0:f32[4] -> peer=1 tag=0\n"
                     "kernel elementwise a0:f32[4] -> a0:f32[4] {\n"
                     "  %1 = neg f32 %0\n"
                     "  yield %1\n"
                     "}\n"
                     "end\n"
                     "rank 1 arena 64\n"
                     "output \"y\" a0:f32[4]\n"
                     "collective recv -> a0:f32[4] peer=0 tag=0\n"
                     "end\n"
                     "data 0\n";
  std::vector<std::vector<float>> outputs;
  std::vector<Status> statuses = runRanks(
      parse(text), {{1, 2, 3, 4}, {}}, outputs, [](Executor &executor, int r) {
        if (r == 1)
          executor.setInstructionHook([](size_t) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            return Status::ok();
          });
      });
  ASSERT_TRUE(statuses[0].isOk()) << statuses[0].message();
  ASSERT_TRUE(statuses[1].isOk()) << statuses[1].message();
  EXPECT_EQ(outputs[0], (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(outputs[1], (std::vector<float>{1, 2, 3, 4}));
}

namespace {

/// `inner`'s events, each answering `poll` as an engine that progresses
/// only inside its own calls would (false until its inner event is
/// waited for), counting the polls.
class PolledEvent : public CommEvent {
public:
  PolledEvent(std::shared_ptr<CommEvent> inner, std::atomic<int> &polls)
      : inner(std::move(inner)), polls(polls) {}
  Status wait() override { return inner->wait(); }
  bool poll() override {
    ++polls;
    return false;
  }

private:
  std::shared_ptr<CommEvent> inner;
  std::atomic<int> &polls;
};

/// `inner` with its transfers' events made PolledEvents.
class PollCountingCommunicator : public Communicator {
public:
  explicit PollCountingCommunicator(std::shared_ptr<Communicator> inner)
      : inner(std::move(inner)) {}
  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  const std::vector<int> &members() const override { return inner->members(); }
  StatusOr<std::shared_ptr<Communicator>>
  group(const std::vector<int> &ranks) override {
    return inner->group(ranks);
  }
  std::shared_ptr<CommEvent> allReduce(const void *send, void *recv,
                                       int64_t count, DType dtype,
                                       ReduceOp op) override {
    return inner->allReduce(send, recv, count, dtype, op);
  }
  std::shared_ptr<CommEvent> allGather(const void *send, void *recv,
                                       int64_t count, DType dtype) override {
    return inner->allGather(send, recv, count, dtype);
  }
  std::shared_ptr<CommEvent> reduceScatter(const void *send, void *recv,
                                           int64_t count, DType dtype,
                                           ReduceOp op) override {
    return inner->reduceScatter(send, recv, count, dtype, op);
  }
  std::shared_ptr<CommEvent> broadcast(void *buffer, int64_t count, DType dtype,
                                       int root) override {
    return inner->broadcast(buffer, count, dtype, root);
  }
  std::shared_ptr<CommEvent> allToAll(const void *send, void *recv,
                                      int64_t count, DType dtype) override {
    return inner->allToAll(send, recv, count, dtype);
  }
  std::shared_ptr<CommEvent> send(const void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return std::make_shared<PolledEvent>(inner->send(buffer, bytes, peer, tag),
                                         polls);
  }
  std::shared_ptr<CommEvent> recv(void *buffer, uint64_t bytes, int peer,
                                  int tag) override {
    return std::make_shared<PolledEvent>(inner->recv(buffer, bytes, peer, tag),
                                         polls);
  }
  void abort(const std::string &message) override { inner->abort(message); }

  std::atomic<int> polls{0};

private:
  std::shared_ptr<Communicator> inner;
};

} // namespace

TEST(MultiRankExecutorTest, TransfersInFlightArePolledBeforeEachKernel) {
  // Rank 0 sends x and runs three kernels that do not touch it before the
  // send is waited for at the end: an engine that moves transfers only
  // inside its own calls (MPI) is polled before each of them. Rank 1
  // receives.
  std::string text = "loom-plan 2\nweights 0\n"
                     "rank 0 arena 128\n"
                     "input \"x\" a0:f32[4]\n"
                     "output \"y\" a64:f32[4]\n"
                     "collective send a0:f32[4] -> peer=1 tag=0\n"
                     "kernel elementwise a0:f32[4] -> a64:f32[4] {\n"
                     "  %1 = neg f32 %0\n"
                     "  yield %1\n"
                     "}\n"
                     "kernel elementwise a64:f32[4] -> a64:f32[4] {\n"
                     "  %1 = neg f32 %0\n"
                     "  yield %1\n"
                     "}\n"
                     "kernel elementwise a64:f32[4] -> a64:f32[4] {\n"
                     "  %1 = neg f32 %0\n"
                     "  yield %1\n"
                     "}\n"
                     "end\n"
                     "rank 1 arena 64\n"
                     "output \"y\" a0:f32[4]\n"
                     "collective recv -> a0:f32[4] peer=0 tag=0\n"
                     "end\n"
                     "data 0\n";
  std::shared_ptr<PollCountingCommunicator> counting;
  std::vector<std::vector<float>> outputs;
  std::vector<Status> statuses =
      runRanks(parse(text), {{1, 2, 3, 4}, {}}, outputs, nullptr, {}, nullptr,
               [&](std::shared_ptr<Communicator> comm,
                   int rank) -> std::shared_ptr<Communicator> {
                 if (rank != 0)
                   return comm;
                 counting = std::make_shared<PollCountingCommunicator>(comm);
                 return counting;
               });
  ASSERT_TRUE(statuses[0].isOk()) << statuses[0].message();
  ASSERT_TRUE(statuses[1].isOk()) << statuses[1].message();
  EXPECT_EQ(outputs[0], (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(outputs[1], (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(counting->polls.load(), 3);
}

TEST(MultiRankExecutorTest, AFailingKernelStopsTheOtherRanks) {
  // Rank 0's gather index is out of range; rank 1 waits in an all_reduce
  // that rank 0 never reaches and must fail with rank 0's message, long
  // before the timeout.
  std::string text = "loom-plan 2\nweights 1\n"
                     "weight 0 \"table\" f32 [2] offset 0 bytes 8\n"
                     "weight 1 \"ids\" i64 [1] offset 64 bytes 8\n"
                     "groups 1\ngroup 0 [0,1]\n"
                     "rank 0 arena 128\n"
                     "input \"x\" a0:f32[1]\n"
                     "output \"y\" a64:f32[1]\n"
                     "kernel gather w0:f32[2] w1:i64[1] -> a0:f32[1] axis=0\n"
                     "collective all_reduce a0:f32[1] -> a64:f32[1] group=0 "
                     "op=sum\n"
                     "end\n"
                     "rank 1 arena 128\n"
                     "input \"x\" a0:f32[1]\n"
                     "output \"y\" a64:f32[1]\n"
                     "collective all_reduce a0:f32[1] -> a64:f32[1] group=0 "
                     "op=sum\n"
                     "end\n"
                     "data 72\n";
  text.replace(text.find("weights 1\n"), 10, "weights 2\n");
  std::string data(72, '\0');
  int64_t bad = 7;
  std::memcpy(&data[64], &bad, 8);
  text += data;
  CommOptions options;
  options.timeout = std::chrono::seconds(30);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> outputs;
  std::vector<Status> statuses =
      runRanks(parse(text), {{1}, {2}}, outputs, nullptr, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(statuses[0].isOk());
  EXPECT_NE(statuses[0].message().find("instruction 0 (gather"),
            std::string::npos)
      << statuses[0].message();
  ASSERT_FALSE(statuses[1].isOk());
  EXPECT_NE(statuses[1].message().find("rank 0 failed: instruction 0 (gather"),
            std::string::npos)
      << statuses[1].message();
  EXPECT_LT(seconds, 10.0);
}

TEST(MultiRankExecutorTest, CommunicatingPlansNeedACommunicator) {
  std::string text = "loom-plan 2\nweights 0\ngroups 1\ngroup 0 [0,1]\n"
                     "rank 0 arena 64\noutput \"y\" a0:f32[1]\n"
                     "collective broadcast a0:f32[1] -> a0:f32[1] group=0 "
                     "root=0\nend\n"
                     "rank 1 arena 64\noutput \"y\" a0:f32[1]\n"
                     "collective broadcast a0:f32[1] -> a0:f32[1] group=0 "
                     "root=0\nend\ndata 0\n";
  auto executor = Executor::create(parse(text), 1);
  ASSERT_FALSE(executor.isOk());
  EXPECT_EQ(executor.status().message(),
            "rank 1 of the plan communicates with 1 other rank(s): run it "
            "with --ranks 2 or under mpirun -np 2");
}

TEST(MultiRankExecutorTest, BadCollectivesAreRejectedWhenLoaded) {
  auto check = [](const std::string &line) {
    std::string text = "loom-plan 2\nweights 0\ngroups 2\ngroup 0 [0,1]\n"
                       "group 1 [1]\n"
                       "rank 0 arena 256\n" +
                       line + "\nend\nrank 1 arena 64\nend\ndata 0\n";
    auto comms = createThreadCommunicators(2);
    auto executor = Executor::create(parse(text), 0, comms[0]);
    return executor.isOk() ? std::string() : executor.status().message();
  };
  EXPECT_EQ(check("collective all_reduce a0:f32[4] -> a64:f32[4] group=0"),
            "instruction 0 (all_reduce, plan line 7): missing attribute 'op' "
            "(sum, max or avg)");
  EXPECT_EQ(check("collective all_reduce a0:f32[4] -> a64:f32[4] group=1 "
                  "op=sum"),
            "instruction 0 (all_reduce, plan line 7): rank 0 is not a member "
            "of group 1");
  EXPECT_EQ(check("collective all_reduce a0:f32[4] -> a64:f32[4] group=5 "
                  "op=sum"),
            "instruction 0 (all_reduce, plan line 7): group 5 does not exist "
            "(the plan has 2)");
  EXPECT_EQ(check("collective all_reduce a0:i1[4] -> a64:i1[4] group=0 "
                  "op=sum"),
            "instruction 0 (all_reduce, plan line 7): cannot reduce i1 (f32, "
            "f64, bf16, i32 and i64 reduce)");
  EXPECT_EQ(check("collective all_reduce a0:i32[4] -> a64:i32[4] group=0 "
                  "op=avg"),
            "instruction 0 (all_reduce, plan line 7): avg needs a float dtype");
  EXPECT_EQ(check("collective all_gather a0:f32[4] -> a64:f32[4] group=0"),
            "instruction 0 (all_gather, plan line 7): output has 4 elements, "
            "expected group size (2) times its input's elements (8)");
  EXPECT_EQ(check("collective reduce_scatter a0:f32[3] -> a64:f32[1] group=0 "
                  "op=max"),
            "instruction 0 (reduce_scatter, plan line 7): input of 3 "
            "elements does not split over 2 ranks");
  EXPECT_EQ(check("collective broadcast a0:f32[4] -> a64:f32[4] group=0 "
                  "root=2"),
            "instruction 0 (broadcast, plan line 7): root 2 is not a rank of "
            "the group (size 2)");
  EXPECT_EQ(check("collective send a0:f32[4] -> peer=0 tag=0"),
            "instruction 0 (send, plan line 7): peer 0 is not another rank of "
            "the plan's 2");
  EXPECT_EQ(check("collective send a0:f32[4] -> a64:f32[4] peer=1 tag=0"),
            "instruction 0 (send, plan line 7): expected 1 input(s) and 0 "
            "output(s)");
  EXPECT_EQ(check("collective all_reduce a0:f32[4] -> a64:f32[4] group=0 "
                  "op=sum root=1"),
            "instruction 0 (all_reduce, plan line 7): unknown attribute "
            "'root'");
  EXPECT_EQ(check("collective scatter a0:f32[4] -> a64:f32[4] group=0"),
            "instruction 0 (scatter, plan line 7): unknown collective "
            "'scatter' (known: all_gather, all_reduce, all_to_all, "
            "broadcast, recv, reduce_scatter, send)");
}

TEST(MultiRankExecutorTest, WholePlanCommunicationIsChecked) {
  auto plan = [](const std::string &rank1) {
    return parse("loom-plan 2\nweights 0\ngroups 1\ngroup 0 [0,1]\n"
                 "rank 0 arena 128\n"
                 "collective all_reduce a0:f32[4] -> a0:f32[4] group=0 op=sum\n"
                 "collective send a0:f32[4] -> peer=1 tag=3\n"
                 "end\nrank 1 arena 128\n" +
                 rank1 + "end\ndata 0\n");
  };
  std::string reduce =
      "collective all_reduce a0:f32[4] -> a0:f32[4] group=0 op=sum\n";
  EXPECT_TRUE(checkCommunication(
                  *plan(reduce + "collective recv -> a0:f32[4] peer=0 tag=3\n"))
                  .isOk());
  EXPECT_EQ(
      checkCommunication(*plan("collective all_reduce a0:f32[4] -> a0:f32[4] "
                               "group=0 op=max\n"
                               "collective recv -> a0:f32[4] peer=0 tag=3\n"))
          .message(),
      "mismatched collectives #0 on group 0: rank 0 instruction 0 calls "
      "all_reduce(4 x f32, sum), rank 1 instruction 0 calls all_reduce(4 x "
      "f32, max)");
  EXPECT_EQ(checkCommunication(
                *plan(reduce + "collective recv -> a0:f32[2] peer=0 tag=3\n"))
                .message(),
            "transfer #0 from rank 0 to rank 1 with tag 3: rank 0 instruction "
            "1 sends (4 x f32), rank 1 instruction 1 receives (2 x f32)");
  EXPECT_EQ(checkCommunication(*plan(reduce)).message(),
            "1 send(s) but 0 receive(s) from rank 0 to rank 1 with tag 3 "
            "(rank 0 instruction 1): a transfer would wait forever");
  // Tags pair transfers for threads and MPI; NCCL pairs them by order.
  std::string swapped = "loom-plan 2\nweights 0\nrank 0 arena 128\n"
                        "collective send a0:f32[4] -> peer=1 tag=0\n"
                        "collective send a16:f32[4] -> peer=1 tag=1\n"
                        "end\nrank 1 arena 128\n"
                        "collective recv -> a16:f32[4] peer=0 tag=1\n"
                        "collective recv -> a0:f32[4] peer=0 tag=0\n"
                        "end\ndata 0\n";
  EXPECT_TRUE(checkCommunication(*parse(swapped)).isOk());
  EXPECT_EQ(checkTransferOrder(*parse(swapped)).message(),
            "rank 0 sends to rank 1 tags 0, 1 in that order, but rank 1 "
            "receives tags 1, 0: NCCL pairs the transfers between two ranks "
            "by their order (a schedule whose ranks run the microbatches in "
            "different orders cannot run on it)");
  EXPECT_TRUE(checkTransferOrder(*plan(reduce + "collective recv -> "
                                                "a0:f32[4] peer=0 tag=3\n"))
                  .isOk());
  EXPECT_EQ(checkCommunication(*plan("")).message(),
            "rank 0 instruction 0: all_reduce(4 x f32, sum) is #0 on group 0, "
            "but rank 1 issues only 0 collective(s) there: it would wait "
            "forever");
}
