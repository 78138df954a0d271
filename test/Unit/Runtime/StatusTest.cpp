#include "loom/Runtime/Status.h"

#include <gtest/gtest.h>

using loomrt::Status;
using loomrt::StatusOr;

TEST(StatusTest, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.isOk());
  EXPECT_TRUE(static_cast<bool>(status));
  EXPECT_EQ(status.message(), "");
}

TEST(StatusTest, ErrorCarriesMessage) {
  Status status = Status::error("bad magic");
  EXPECT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "bad magic");
}

TEST(StatusTest, ContextPrefixesErrorsOnly) {
  EXPECT_EQ(Status::error("bad magic").withContext("plan.bin").message(),
            "plan.bin: bad magic");
  EXPECT_TRUE(Status::ok().withContext("plan.bin").isOk());
}

TEST(StatusOrTest, HoldsValueOrStatus) {
  StatusOr<int> value = 42;
  ASSERT_TRUE(value.isOk());
  EXPECT_EQ(*value, 42);

  StatusOr<int> failure = Status::error("no such rank");
  EXPECT_FALSE(failure.isOk());
  EXPECT_EQ(failure.status().message(), "no such rank");
}
