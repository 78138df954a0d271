//===- CommunicatorTest.cpp - Collectives and transfers between ranks -----===//
//
// Every operation on 1, 2, 3, 4 and 8 ranks (threads communicator), with
// counts that do not divide evenly, in place, in sub-groups; and the failure
// paths: a rank that fails or never arrives, mismatched collectives.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"
#include "CollectiveChecks.h"

#include <functional>
#include <gtest/gtest.h>
#include <thread>

using namespace loomrt;
using namespace loomrt::testing;

namespace {

/// Runs `body(rank, communicator)` on every rank, each in its own thread.
void onRanks(int size, const std::function<void(int, Communicator &)> &body,
             CommOptions options = {}) {
  std::vector<std::shared_ptr<Communicator>> ranks =
      createThreadCommunicators(size, options);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] { body(r, *ranks[size_t(r)]); });
  for (std::thread &thread : threads)
    thread.join();
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduce) {
  onRanks(GetParam(), [](int, Communicator &comm) { checkAllReduce(comm); });
}

TEST_P(Collectives, AllGatherReduceScatterBroadcastAllToAll) {
  onRanks(GetParam(), [](int, Communicator &comm) {
    checkAllGatherReduceScatterBroadcastAllToAll(comm);
  });
}

TEST_P(Collectives, SendRecvRing) {
  onRanks(GetParam(), [](int, Communicator &comm) { checkSendRecvRing(comm); });
}

TEST_P(Collectives, SubGroups) {
  onRanks(GetParam(), [](int, Communicator &comm) { checkSubGroups(comm); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8));

// The same operations through wrapAsync (a progress thread per
// communicator, as loom-run --ranks runs them).
void onAsyncRanks(int size,
                  const std::function<void(int, Communicator &)> &body) {
  std::vector<std::shared_ptr<Communicator>> ranks =
      createThreadCommunicators(size);
  for (std::shared_ptr<Communicator> &rank : ranks)
    rank = wrapAsync(rank);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] { body(r, *ranks[size_t(r)]); });
  for (std::thread &thread : threads)
    thread.join();
}

TEST_P(Collectives, AsyncEveryOperation) {
  onAsyncRanks(GetParam(), [](int, Communicator &comm) {
    checkAllReduce(comm);
    checkAllGatherReduceScatterBroadcastAllToAll(comm);
    checkSendRecvRing(comm);
    checkSubGroups(comm);
  });
}

TEST(AsyncCommunicator, PostingReturnsBeforeThePeersArrive) {
  // Rank 1 posts 300 ms late: rank 0's posting returns at once, its wait
  // returns the sum, and the event says it completed after rank 1 came.
  using Clock = std::chrono::steady_clock;
  auto ns = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  };
  onAsyncRanks(2, [&](int rank, Communicator &comm) {
    float value = float(rank + 1), sum = 0;
    if (rank == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Clock::time_point before = Clock::now();
    std::shared_ptr<CommEvent> event =
        comm.allReduce(&value, &sum, 1, DType::F32, ReduceOp::Sum);
    Clock::time_point posted = Clock::now();
    ASSERT_TRUE(event->wait().isOk());
    EXPECT_EQ(sum, 3.0f);
    if (rank == 0) {
      EXPECT_LT(posted - before, std::chrono::milliseconds(100));
      EXPECT_GE(event->completedAtNs() - ns(before), 250'000'000);
    }
  });
}

//===----------------------------------------------------------------------===//
// Failures: errors, never hangs
//===----------------------------------------------------------------------===//

TEST(CommunicatorFailure, AFailedRankStopsTheOthers) {
  std::vector<std::string> errors(3);
  onRanks(3, [&](int r, Communicator &comm) {
    if (r == 1) {
      comm.abort("kernel error in matmul");
      return;
    }
    float x = 1, y;
    Status status =
        comm.allReduce(&x, &y, 1, DType::F32, ReduceOp::Sum)->wait();
    errors[size_t(r)] = status.message();
  });
  // Whether a rank was already waiting or came later, it stops with the
  // failed rank's message and says where it was.
  for (int r : {0, 2})
    EXPECT_EQ(errors[size_t(r)].rfind("rank 1 failed: kernel error in matmul "
                                      "(rank " +
                                          std::to_string(r) +
                                          " was in all_reduce",
                                      0),
              0u)
        << errors[size_t(r)];
}

TEST(CommunicatorFailure, AMissingRankTimesOut) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(200);
  std::vector<std::string> errors(3);
  onRanks(
      3,
      [&](int r, Communicator &comm) {
        if (r == 2)
          return; // exits without taking part
        float x = 1, y;
        errors[size_t(r)] = comm.allReduce(&x, &y, 1, DType::F32, ReduceOp::Sum)
                                ->wait()
                                .message();
      },
      options);
  // The first rank to time out names the missing rank; the other stops
  // with its message.
  bool named = false;
  for (int r : {0, 1})
    named |= errors[size_t(r)].find("timed out after 200 ms, waiting for "
                                    "rank 2") != std::string::npos;
  EXPECT_TRUE(named) << errors[0] << "\n" << errors[1];
  EXPECT_FALSE(errors[0].empty());
  EXPECT_FALSE(errors[1].empty());
}

TEST(CommunicatorFailure, MismatchedCollectivesAreReported) {
  std::vector<std::string> errors(2);
  onRanks(2, [&](int r, Communicator &comm) {
    std::vector<float> x(4, 1), y(4);
    errors[size_t(r)] = comm.allReduce(x.data(), y.data(), r == 0 ? 4 : 3,
                                       DType::F32, ReduceOp::Sum)
                            ->wait()
                            .message();
  });
  for (const std::string &error : errors)
    EXPECT_NE(error.find("mismatched collectives in all_reduce #0 of group "
                         "[0,1]: rank 0 called all_reduce(4 x f32, sum), "
                         "rank 1 called all_reduce(3 x f32, sum)"),
              std::string::npos)
        << error;
}

TEST(CommunicatorFailure, AnUnmatchedReceiveTimesOut) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(100);
  std::string error;
  onRanks(
      2,
      [&](int r, Communicator &comm) {
        if (r == 0) {
          float x;
          error = comm.recv(&x, 4, 1, 3)->wait().message();
        }
      },
      options);
  EXPECT_EQ(error, "rank 0: recv from rank 1 (tag 3, 4 bytes) timed out "
                   "after 100 ms");
}

TEST(CommunicatorFailure, BadArguments) {
  onRanks(2, [&](int r, Communicator &comm) {
    EXPECT_FALSE(comm.group({1, 0}).isOk());
    EXPECT_FALSE(comm.group({r == 0 ? 1 : 0}).isOk());
    float x = 0;
    EXPECT_FALSE(comm.send(&x, 4, r, 0)->wait().isOk());
    EXPECT_EQ(comm.allToAll(&x, &x, 1, DType::F32)->wait().message(),
              "rank " + std::to_string(r) + ": all_to_all cannot run in place");
  });
}

} // namespace
