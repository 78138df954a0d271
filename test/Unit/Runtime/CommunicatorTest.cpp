//===- CommunicatorTest.cpp - Collectives and transfers between ranks -----===//
//
// Every operation on 1, 2, 3, 4 and 8 ranks (threads communicator), with
// counts that do not divide evenly, in place, in sub-groups; and the failure
// paths: a rank that fails or never arrives, mismatched collectives.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#include <functional>
#include <gtest/gtest.h>
#include <thread>

using namespace loom::runtime;

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

/// Rank r's value of element i.
float value(int r, int64_t i) { return float(r * 1000 + i % 97); }

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduce) {
  int n = GetParam();
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000)}) {
    onRanks(n, [&](int r, Communicator &comm) {
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), n);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
        std::vector<float> send(count), recv(count);
        for (int64_t i = 0; i < count; ++i)
          send[size_t(i)] = value(r, i);
        ASSERT_TRUE(
            comm.allReduce(send.data(), recv.data(), count, DType::F32, op)
                ->wait()
                .isOk());
        for (int64_t i = 0; i < count; ++i) {
          double sum = 0, max = -1e30;
          for (int k = 0; k < n; ++k) {
            sum += value(k, i);
            max = std::max<double>(max, value(k, i));
          }
          double expected = op == ReduceOp::Sum   ? sum
                            : op == ReduceOp::Max ? max
                                                  : sum / n;
          ASSERT_NEAR(recv[size_t(i)], expected,
                      1e-3 * (1 + std::abs(expected)))
              << reduceOpName(op) << " count " << count << " i " << i;
        }
        // In place, i64.
        std::vector<int64_t> data(size_t(count), r + 1);
        ASSERT_TRUE(comm.allReduce(data.data(), data.data(), count, DType::I64,
                                   ReduceOp::Sum)
                        ->wait()
                        .isOk());
        for (int64_t x : data)
          ASSERT_EQ(x, int64_t(n) * (n + 1) / 2);
      }
    });
  }
}

TEST_P(Collectives, AllGatherReduceScatterBroadcastAllToAll) {
  int n = GetParam();
  const int64_t count = 5;
  onRanks(n, [&](int r, Communicator &comm) {
    std::vector<double> mine(count), all(size_t(count * n));
    for (int64_t i = 0; i < count; ++i)
      mine[size_t(i)] = value(r, i);
    ASSERT_TRUE(
        comm.allGather(mine.data(), all.data(), count, DType::F64)->wait());
    for (int k = 0; k < n; ++k)
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(all[size_t(k * count + i)], value(k, i));

    // Reduce-scatter: block b of every rank summed lands on rank b.
    std::vector<double> blocks(size_t(count * n)), reduced(count);
    for (int b = 0; b < n; ++b)
      for (int64_t i = 0; i < count; ++i)
        blocks[size_t(b * count + i)] = value(r, b * count + i);
    ASSERT_TRUE(comm.reduceScatter(blocks.data(), reduced.data(), count,
                                   DType::F64, ReduceOp::Sum)
                    ->wait());
    for (int64_t i = 0; i < count; ++i) {
      double expected = 0;
      for (int k = 0; k < n; ++k)
        expected += value(k, r * count + i);
      ASSERT_EQ(reduced[size_t(i)], expected);
    }

    // Broadcast from the last rank, any dtype.
    std::vector<int32_t> buffer(3, r);
    ASSERT_TRUE(comm.broadcast(buffer.data(), 3, DType::I32, n - 1)->wait());
    ASSERT_EQ(buffer, std::vector<int32_t>(3, n - 1));

    // All-to-all: block j of rank i's result is block i of rank j's input.
    std::vector<float> send(size_t(2 * n)), recv(size_t(2 * n));
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < 2; ++e)
        send[size_t(j * 2 + e)] = float(r * 100 + j * 10 + e);
    ASSERT_TRUE(comm.allToAll(send.data(), recv.data(), 2, DType::F32)->wait());
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < 2; ++e)
        ASSERT_EQ(recv[size_t(j * 2 + e)], float(j * 100 + r * 10 + e));
  });
}

TEST_P(Collectives, SendRecvRing) {
  int n = GetParam();
  if (n == 1)
    GTEST_SKIP() << "a ring needs two ranks";
  onRanks(n, [&](int r, Communicator &comm) {
    // Everyone sends first and receives second; the waits come after both
    // are posted, as an executor overlapping transfers does.
    std::vector<float> out(100, float(r)), in(100, -1);
    auto sent = comm.send(out.data(), 400, (r + 1) % n, /*tag=*/7);
    auto received = comm.recv(in.data(), 400, (r + n - 1) % n, /*tag=*/7);
    ASSERT_TRUE(sent->wait());
    ASSERT_TRUE(received->wait());
    ASSERT_EQ(in, std::vector<float>(100, float((r + n - 1) % n)));
  });
}

TEST_P(Collectives, SubGroups) {
  int n = GetParam();
  if (n % 2)
    GTEST_SKIP() << "pairs need an even rank count";
  // A 2 x n/2 mesh: groups of consecutive pairs and of equal parity.
  onRanks(n, [&](int r, Communicator &world) {
    auto pair = world.group({r - r % 2, r - r % 2 + 1});
    ASSERT_TRUE(pair.isOk()) << pair.status().message();
    std::vector<int> parity;
    for (int k = r % 2; k < n; k += 2)
      parity.push_back(k);
    auto column = world.group(parity);
    ASSERT_TRUE(column.isOk());
    EXPECT_EQ((*column)->rank(), r / 2);
    int64_t x = r, sum = 0;
    ASSERT_TRUE(
        (*pair)->allReduce(&x, &sum, 1, DType::I64, ReduceOp::Sum)->wait());
    EXPECT_EQ(sum, 2 * (r - r % 2) + 1);
    ASSERT_TRUE(
        (*column)->allReduce(&x, &sum, 1, DType::I64, ReduceOp::Max)->wait());
    EXPECT_EQ(sum, n - 2 + r % 2);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8));

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
