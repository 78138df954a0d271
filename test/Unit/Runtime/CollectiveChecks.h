//===- CollectiveChecks.h - One rank's checks of every collective ---------===//
//
// Shared by the threads (CommunicatorTest.cpp) and MPI
// (MPICommunicatorTest.cpp) tests: each function is what one rank of an
// N-rank group runs, with gtest assertions.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_COLLECTIVECHECKS_H
#define LOOM_TEST_UNIT_RUNTIME_COLLECTIVECHECKS_H

#include "loom/Runtime/Communicator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

namespace loomrt {
namespace testing {

/// Rank r's value of element i.
inline float value(int r, int64_t i) { return float(r * 1000 + i % 97); }

/// The bits of a bf16 that holds `v` exactly (small integers).
inline uint16_t bf16Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return uint16_t(bits >> 16);
}
inline float fromBF16Bits(uint16_t half) {
  uint32_t bits = uint32_t(half) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

/// bf16 sums and maxima (gradients kept in bf16), all-reduced and
/// reduce-scattered, on small integers whose sums bf16 holds exactly.
inline void checkBF16Reductions(Communicator &comm) {
  int n = comm.size(), r = comm.rank();
  const int64_t count = 12;
  auto mine = [](int rank, int64_t i) { return float(rank + 1 + i % 3); };
  std::vector<uint16_t> send(size_t(count * n)), recv(size_t(count * n));
  for (int64_t i = 0; i < count * n; ++i)
    send[size_t(i)] = bf16Bits(mine(r, i));
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    ASSERT_TRUE(
        comm.allReduce(send.data(), recv.data(), count * n, DType::BF16, op)
            ->wait()
            .isOk());
    for (int64_t i = 0; i < count * n; ++i) {
      float expected = op == ReduceOp::Max ? mine(n - 1, i) : 0;
      for (int k = 0; op == ReduceOp::Sum && k < n; ++k)
        expected += mine(k, i);
      ASSERT_EQ(fromBF16Bits(recv[size_t(i)]), expected)
          << reduceOpName(op) << " i " << i;
    }
  }
  std::vector<uint16_t> block(static_cast<size_t>(count));
  ASSERT_TRUE(comm.reduceScatter(send.data(), block.data(), count, DType::BF16,
                                 ReduceOp::Sum)
                  ->wait()
                  .isOk());
  for (int64_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int k = 0; k < n; ++k)
      expected += mine(k, r * count + i);
    ASSERT_EQ(fromBF16Bits(block[size_t(i)]), expected) << "block i " << i;
  }
}

/// Sum, max and avg of f32 with uneven counts; in place in i64; bf16.
inline void checkAllReduce(Communicator &comm) {
  int n = comm.size(), r = comm.rank();
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000)}) {
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
        ASSERT_NEAR(recv[size_t(i)], expected, 1e-3 * (1 + std::abs(expected)))
            << reduceOpName(op) << " count " << count << " i " << i;
      }
      std::vector<int64_t> data(size_t(count), r + 1);
      ASSERT_TRUE(comm.allReduce(data.data(), data.data(), count, DType::I64,
                                 ReduceOp::Sum)
                      ->wait()
                      .isOk());
      for (int64_t x : data)
        ASSERT_EQ(x, int64_t(n) * (n + 1) / 2);
    }
  }
  checkBF16Reductions(comm);
}

inline void checkAllGatherReduceScatterBroadcastAllToAll(Communicator &comm) {
  int n = comm.size(), r = comm.rank();
  const int64_t count = 5;
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
}

/// Everyone sends to the next rank and receives from the previous one; the
/// waits come after both are posted, as an executor overlapping transfers
/// does.
inline void checkSendRecvRing(Communicator &comm) {
  int n = comm.size(), r = comm.rank();
  if (n == 1)
    return;
  std::vector<float> out(100, float(r)), in(100, -1);
  auto sent = comm.send(out.data(), 400, (r + 1) % n, /*tag=*/7);
  auto received = comm.recv(in.data(), 400, (r + n - 1) % n, /*tag=*/7);
  ASSERT_TRUE(sent->wait());
  ASSERT_TRUE(received->wait());
  ASSERT_EQ(in, std::vector<float>(100, float((r + n - 1) % n)));
}

/// A 2 x n/2 mesh: groups of consecutive pairs and of equal parity.
inline void checkSubGroups(Communicator &world) {
  int n = world.size(), r = world.rank();
  if (n % 2)
    return;
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
}

} // namespace testing
} // namespace loomrt

#endif // LOOM_TEST_UNIT_RUNTIME_COLLECTIVECHECKS_H
