//===- MPICommunicatorTest.cpp - The collectives over MPI -----------------===//
//
// Run under `mpirun -np N` (ctest registers N = 1, 2, 3, 4, 8): every process
// is one rank and runs the same checks as the threads engine's test. With
// --abort-rank R, rank R aborts mid-run and the others must not hang.
//
//===----------------------------------------------------------------------===//

#include "CollectiveChecks.h"
#include "loom/Runtime/Communicator.h"

#include <chrono>
#include <cstring>
#include <gtest/gtest.h>
#include <thread>

using namespace loomrt;
using namespace loomrt::testing;

namespace {

std::shared_ptr<Communicator> world;

TEST(MPICollectives, AllReduce) { checkAllReduce(*world); }
TEST(MPICollectives, AllGatherReduceScatterBroadcastAllToAll) {
  checkAllGatherReduceScatterBroadcastAllToAll(*world);
}
TEST(MPICollectives, SendRecvRing) { checkSendRecvRing(*world); }
TEST(MPICollectives, SubGroups) { checkSubGroups(*world); }

TEST(MPICollectives, MismatchesAreReportedInCheckingMode) {
  if (world->size() < 2)
    GTEST_SKIP() << "needs two ranks";
  CommOptions options;
  options.checkCollectives = true;
  auto checked = createMPICommunicator(options);
  ASSERT_TRUE(checked.isOk());
  std::vector<float> x(4, 1), y(4);
  Status status =
      (*checked)
          ->allReduce(x.data(), y.data(), world->rank() == 0 ? 4 : 3,
                      DType::F32, ReduceOp::Sum)
          ->wait();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("mismatched collectives"), std::string::npos)
      << status.message();
}

TEST(MPICollectives, PollingAloneCompletesALargeSend) {
  // A send far above MPI's eager size completes through polls alone,
  // without a wait: the executor polls what is in flight between kernels,
  // so that a peer waiting for this rank's data does not wait for its next
  // wait (without single-copy transfers the sender moves the data).
  if (world->size() < 2)
    GTEST_SKIP() << "needs two ranks";
  if (world->rank() > 1)
    return;
  std::vector<float> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = float(i % 1000);
  size_t bytes = data.size() * sizeof(float);
  if (world->rank() == 0) {
    std::shared_ptr<CommEvent> sent = world->send(data.data(), bytes, 1, 7);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool done = false;
    while (!(done = sent->poll()) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_TRUE(done) << "the send did not complete through polls in 30 s";
    EXPECT_GE(sent->completedAtNs(), 0);
    EXPECT_TRUE(sent->wait().isOk());
  } else {
    std::vector<float> received(data.size());
    EXPECT_TRUE(world->recv(received.data(), bytes, 0, 7)->wait().isOk());
    EXPECT_EQ(received, data);
  }
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto created = createMPICommunicator();
  if (!created) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }
  world = *created;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--abort-rank") == 0) {
      // A rank that fails mid-run: the others are in an all-reduce.
      if (world->rank() == std::atoi(argv[i + 1]))
        world->abort("injected failure");
      float x = 1, y;
      Status status =
          world->allReduce(&x, &y, 1, DType::F32, ReduceOp::Sum)->wait();
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
