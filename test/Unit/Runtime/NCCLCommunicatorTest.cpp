//===- NCCLCommunicatorTest.cpp - The collectives over NCCL ---------------===//
//
// One process per rank and one GPU per rank, under `mpirun -np N` where the
// runtime has MPI (ctest registers N = 1, which one GPU allows, and N = 2).
// Without enough GPUs the binary exits 77, which ctest reports as skipped.
// The checks mirror CollectiveChecks.h with device buffers, and add what is
// NCCL's own: more dtypes, in-place forms, and a timeout that aborts the NCCL
// communicator. With --abort, rank 0 aborts and the job must end with its
// message.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <thread>

using namespace loomrt;

namespace loomrt {
// Defined by the NCCL engine for this test only.
cudaStream_t ncclStreamForTesting(Communicator &communicator);
} // namespace loomrt

namespace {

std::shared_ptr<Communicator> world;

/// A device copy of a host vector.
template <typename T> class DeviceBuffer {
public:
  explicit DeviceBuffer(const std::vector<T> &values) : count(values.size()) {
    EXPECT_EQ(cudaMalloc(&data, std::max<size_t>(1, count) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, values.data(), count * sizeof(T),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  std::vector<T> read() const {
    std::vector<T> values(count);
    EXPECT_EQ(cudaMemcpy(values.data(), data, count * sizeof(T),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }

  T *data = nullptr;
  size_t count;
};

/// Rank r's value of element i (small integers: exact in bf16 too).
float value(int r, int64_t i) { return float((r + 1) * (i % 5 + 1)); }

/// bf16 as its bits: the top half of an f32 (exact for value()'s numbers).
uint16_t toBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t(bits >> 16);
}
float fromBF16(uint16_t x) {
  uint32_t bits = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(NCCL, WorldIsOneRankPerGPU) {
  EXPECT_TRUE(haveNCCL());
  EXPECT_GE(world->rank(), 0);
  EXPECT_LT(world->rank(), world->size());
  ASSERT_EQ(int(world->members().size()), world->size());
  EXPECT_EQ(world->members()[size_t(world->rank())], world->rank());
}

TEST(NCCL, AllReduce) {
  int n = world->size(), r = world->rank();
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000)})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      std::vector<float> mine(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        mine[size_t(i)] = value(r, i);
      DeviceBuffer<float> send(mine), recv{std::vector<float>(mine.size())};
      ASSERT_TRUE(world->allReduce(send.data, recv.data, count, DType::F32, op)
                      ->wait());
      std::vector<float> got = recv.read();
      for (int64_t i = 0; i < count; ++i) {
        double sum = 0, max = 0;
        for (int k = 0; k < n; ++k) {
          sum += value(k, i);
          max = std::max<double>(max, value(k, i));
        }
        double expected = op == ReduceOp::Sum   ? sum
                          : op == ReduceOp::Max ? max
                                                : sum / n;
        ASSERT_NEAR(got[size_t(i)], expected, 1e-5 * expected)
            << reduceOpName(op) << " count " << count << " i " << i;
      }
    }
  // In place, integers and f64.
  DeviceBuffer<int64_t> ints(std::vector<int64_t>(5, r + 1));
  ASSERT_TRUE(
      world->allReduce(ints.data, ints.data, 5, DType::I64, ReduceOp::Sum)
          ->wait());
  EXPECT_EQ(ints.read(), std::vector<int64_t>(5, int64_t(n) * (n + 1) / 2));
  DeviceBuffer<int32_t> small(std::vector<int32_t>(3, 10 * (r + 1)));
  ASSERT_TRUE(
      world->allReduce(small.data, small.data, 3, DType::I32, ReduceOp::Avg)
          ->wait());
  EXPECT_EQ(small.read(), std::vector<int32_t>(3, 5 * (n + 1)));
  DeviceBuffer<double> doubles(std::vector<double>(4, 0.5 + r));
  ASSERT_TRUE(
      world->allReduce(doubles.data, doubles.data, 4, DType::F64, ReduceOp::Max)
          ->wait());
  EXPECT_EQ(doubles.read(), std::vector<double>(4, n - 0.5));
}

TEST(NCCL, AllReduceBF16) {
  int n = world->size(), r = world->rank();
  std::vector<uint16_t> mine(9);
  for (int64_t i = 0; i < 9; ++i)
    mine[size_t(i)] = toBF16(value(r, i));
  DeviceBuffer<uint16_t> data(mine);
  ASSERT_TRUE(
      world->allReduce(data.data, data.data, 9, DType::BF16, ReduceOp::Sum)
          ->wait());
  std::vector<uint16_t> got = data.read();
  for (int64_t i = 0; i < 9; ++i) {
    float expected = 0;
    for (int k = 0; k < n; ++k)
      expected += value(k, i);
    EXPECT_EQ(fromBF16(got[size_t(i)]), expected) << i;
  }
}

TEST(NCCL, AllGatherReduceScatterBroadcastAllToAll) {
  int n = world->size(), r = world->rank();
  const int64_t count = 5;
  std::vector<double> mine(count);
  for (int64_t i = 0; i < count; ++i)
    mine[size_t(i)] = value(r, i);
  DeviceBuffer<double> send(mine), all{std::vector<double>(size_t(n * count))};
  ASSERT_TRUE(world->allGather(send.data, all.data, count, DType::F64)->wait());
  std::vector<double> expected;
  for (int k = 0; k < n; ++k)
    for (int64_t i = 0; i < count; ++i)
      expected.push_back(value(k, i));
  EXPECT_EQ(all.read(), expected);
  // In place: this rank's block of the result is the input.
  std::vector<double> placed(size_t(n * count), -1);
  std::copy(mine.begin(), mine.end(), placed.begin() + r * count);
  DeviceBuffer<double> inPlace(placed);
  ASSERT_TRUE(
      world
          ->allGather(inPlace.data + r * count, inPlace.data, count, DType::F64)
          ->wait());
  EXPECT_EQ(inPlace.read(), expected);

  // Reduce-scatter: block b of every rank summed lands on rank b.
  std::vector<float> blocks(size_t(n * count));
  for (int64_t i = 0; i < n * count; ++i)
    blocks[size_t(i)] = value(r, i);
  DeviceBuffer<float> scattered(blocks),
      reduced{std::vector<float>(size_t(count))};
  ASSERT_TRUE(world
                  ->reduceScatter(scattered.data, reduced.data, count,
                                  DType::F32, ReduceOp::Sum)
                  ->wait());
  std::vector<float> got = reduced.read();
  for (int64_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int k = 0; k < n; ++k)
      sum += value(k, r * count + i);
    EXPECT_EQ(got[size_t(i)], sum) << i;
  }

  // Broadcast from the last rank, in i32 and in i1 (bytes).
  DeviceBuffer<int32_t> ints(std::vector<int32_t>(3, r));
  ASSERT_TRUE(world->broadcast(ints.data, 3, DType::I32, n - 1)->wait());
  EXPECT_EQ(ints.read(), std::vector<int32_t>(3, n - 1));
  DeviceBuffer<uint8_t> flags(std::vector<uint8_t>(6, uint8_t(r == n - 1)));
  ASSERT_TRUE(world->broadcast(flags.data, 6, DType::I1, n - 1)->wait());
  EXPECT_EQ(flags.read(), std::vector<uint8_t>(6, 1));

  // All-to-all: block j of rank i's result is block i of rank j's input.
  std::vector<float> out(size_t(2 * n));
  for (int j = 0; j < n; ++j)
    for (int e = 0; e < 2; ++e)
      out[size_t(j * 2 + e)] = float(r * 100 + j * 10 + e);
  DeviceBuffer<float> sendBlocks(out),
      recvBlocks{std::vector<float>(out.size())};
  ASSERT_TRUE(
      world->allToAll(sendBlocks.data, recvBlocks.data, 2, DType::F32)->wait());
  got = recvBlocks.read();
  for (int j = 0; j < n; ++j)
    for (int e = 0; e < 2; ++e)
      EXPECT_EQ(got[size_t(j * 2 + e)], float(j * 100 + r * 10 + e));
}

TEST(NCCL, SendRecvRing) {
  int n = world->size(), r = world->rank();
  DeviceBuffer<float> out(std::vector<float>(1000, float(r))),
      in(std::vector<float>(1000, -1));
  if (n == 1) {
    // A rank cannot send to itself (as with every engine).
    Status status = world->send(out.data, 4000, 0, 7)->wait();
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find("send to rank 0 of a group of 1"),
              std::string::npos)
        << status.message();
    return;
  }
  // Both posted, then both waited: launched as one NCCL group.
  auto sent = world->send(out.data, 4000, (r + 1) % n, 7);
  auto received = world->recv(in.data, 4000, (r + n - 1) % n, 7);
  ASSERT_TRUE(sent->wait());
  ASSERT_TRUE(received->wait());
  EXPECT_EQ(in.read(), std::vector<float>(1000, float((r + n - 1) % n)));
}

/// A send held back (to be launched with later transfers as one NCCL group)
/// is launched before its rank blocks on something else. Here rank 1's
/// collective waits, on the device, for the receive that matches rank 0's
/// send, while rank 0's host waits for that collective: holding the send
/// back would stall both until the timeout.
TEST(NCCL, HeldBackSendsLaunchBeforeTheHostBlocks) {
  int n = world->size(), r = world->rank();
  if (n < 2)
    GTEST_SKIP() << "needs 2 ranks";
  std::vector<int> everyone;
  for (int k = 0; k < n; ++k)
    everyone.push_back(k);
  auto all = world->group(everyone); // not the world's own communicator
  ASSERT_TRUE(all.isOk()) << all.status().message();
  DeviceBuffer<float> message(std::vector<float>(256, float(r)));
  DeviceBuffer<float> x(std::vector<float>{1.0f});
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            cudaSuccess);
  std::shared_ptr<CommEvent> transfer;
  if (r == 0) {
    transfer = world->send(message.data, 1024, 1, 3);
  } else if (r == 1) {
    transfer = world->recv(message.data, 1024, 0, 3);
    ASSERT_TRUE(transfer->waitOnStream(compute));
  }
  (*all)->orderAfter(compute);
  auto sum = (*all)->allReduce(x.data, x.data, 1, DType::F32, ReduceOp::Sum);
  Status status = sum->wait(); // rank 0 blocks here, its send not launched
  ASSERT_TRUE(status.isOk()) << status.message();
  if (transfer) {
    ASSERT_TRUE(transfer->wait());
  }
  EXPECT_EQ(x.read(), std::vector<float>{float(n)});
  if (r == 1) {
    EXPECT_EQ(message.read(), std::vector<float>(256, 0.0f));
  }
  cudaStreamDestroy(compute);
}

TEST(NCCL, SubGroups) {
  int n = world->size(), r = world->rank();
  // Every rank alone: made by its one member only.
  auto alone = world->group({r});
  ASSERT_TRUE(alone.isOk()) << alone.status().message();
  EXPECT_EQ((*alone)->size(), 1);
  EXPECT_EQ((*alone)->rank(), 0);
  auto again = world->group({r});
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->get(), alone->get());
  DeviceBuffer<int64_t> x(std::vector<int64_t>{r + 1});
  ASSERT_TRUE((*alone)
                  ->allReduce(x.data, x.data, 1, DType::I64, ReduceOp::Sum)
                  ->wait());
  EXPECT_EQ(x.read(), std::vector<int64_t>{r + 1});
  // The whole world as a group, asked from a group.
  std::vector<int> everyone;
  for (int k = 0; k < n; ++k)
    everyone.push_back(k);
  auto all = (*alone)->group(everyone);
  ASSERT_TRUE(all.isOk()) << all.status().message();
  ASSERT_TRUE(
      (*all)->allReduce(x.data, x.data, 1, DType::I64, ReduceOp::Sum)->wait());
  EXPECT_EQ(x.read(), std::vector<int64_t>{int64_t(n) * (n + 1) / 2});
  EXPECT_FALSE(world->group({}).isOk());
  EXPECT_FALSE(world->group({n}).isOk());
}

TEST(NCCL, BadArguments) {
  int n = world->size();
  DeviceBuffer<uint8_t> bits(std::vector<uint8_t>(4, 1));
  Status status =
      world->allReduce(bits.data, bits.data, 4, DType::I1, ReduceOp::Max)
          ->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("all_reduce cannot reduce i1"),
            std::string::npos)
      << status.message();
  status = world->broadcast(bits.data, 4, DType::I1, n)->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("is not a rank of the group"),
            std::string::npos);
  // The world still works.
  ASSERT_TRUE(world->broadcast(bits.data, 4, DType::I1, 0)->wait());
}

TEST(NCCL, CheckingMode) {
  CommOptions options;
  options.checkCollectives = true;
  auto checked = createNCCLCommunicator(options);
  ASSERT_TRUE(checked.isOk()) << checked.status().message();
  int n = (*checked)->size(), r = (*checked)->rank();
  DeviceBuffer<float> x(std::vector<float>(4, 1));
  ASSERT_TRUE((*checked)
                  ->allReduce(x.data, x.data, 4, DType::F32, ReduceOp::Sum)
                  ->wait());
  EXPECT_EQ(x.read(), std::vector<float>(4, float(n)));
  if (n < 2)
    return;
  Status status =
      (*checked)
          ->allReduce(x.data, x.data, r == 0 ? 4 : 3, DType::F32, ReduceOp::Sum)
          ->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("mismatched collectives"), std::string::npos)
      << status.message();
}

TEST(NCCL, ATimeoutAbortsTheCommunicator) {
  if (world->size() != 1)
    GTEST_SKIP() << "holds up one rank's stream";
  // Long enough for NCCL's initialization, which has the same timeout.
  CommOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  auto created = createNCCLCommunicator(options);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  std::shared_ptr<Communicator> comm = *created;
  DeviceBuffer<float> x(std::vector<float>(8, 1));
  ASSERT_TRUE(
      comm->allReduce(x.data, x.data, 8, DType::F32, ReduceOp::Sum)->wait());
  // Hold the stream up for 4 s: the next all-reduce cannot finish in 2 s.
  cudaStream_t stream = ncclStreamForTesting(*comm);
  ASSERT_NE(stream, nullptr);
  ASSERT_EQ(
      cudaLaunchHostFunc(
          stream,
          [](void *) { std::this_thread::sleep_for(std::chrono::seconds(4)); },
          nullptr),
      cudaSuccess);
  Status status =
      comm->allReduce(x.data, x.data, 8, DType::F32, ReduceOp::Sum)->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find(
                "rank 0: all_reduce #1 of group [0] (8 x f32) timed out "
                "after 2000 ms"),
            std::string::npos)
      << status.message();
  // Aborted: later operations fail at once, naming the cause.
  status = comm->broadcast(x.data, 8, DType::F32, 0)->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("the NCCL communicator was aborted"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

} // namespace

int main(int argc, char **argv) {
  // Skipped (exit 77) without a GPU per rank of this host.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: NCCL tests skipped\n");
    return 77;
  }
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    if (std::atoi(local) > devices) {
      std::printf("%s ranks but %d CUDA devices on this host: NCCL tests "
                  "skipped\n",
                  local, devices);
      return 77;
    }
  ::testing::InitGoogleTest(&argc, argv);
  auto created = createNCCLCommunicator();
  if (!created) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }
  world = *created;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--abort") == 0) {
      // Rank 0 fails mid-run; with MPI the job ends here.
      if (world->rank() == 0)
        world->abort("injected failure");
      float *x = nullptr;
      cudaMalloc(&x, sizeof(float));
      Status status =
          world->allReduce(x, x, 1, DType::F32, ReduceOp::Sum)->wait();
      std::fprintf(stderr, "rank %d: %s\n", world->rank(),
                   status.message().c_str());
      return 1;
    }
  // Only rank 0 prints gtest's progress.
  if (world->rank() != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  world.reset();
  return failed;
}
