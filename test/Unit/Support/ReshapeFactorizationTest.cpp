#include "loom/Support/ReshapeFactorization.h"

#include <gtest/gtest.h>
#include <random>
#include <vector>

using mlir::loom::factorizeReshape;
using mlir::loom::ReshapeFactorization;

namespace {
using Dims = std::vector<std::vector<unsigned>>;

Dims toDims(const llvm::SmallVector<llvm::SmallVector<unsigned, 2>> &dims) {
  Dims result;
  for (const auto &dim : dims)
    result.emplace_back(dim.begin(), dim.end());
  return result;
}

std::vector<int64_t> sizes(const ReshapeFactorization &f) {
  std::vector<int64_t> result;
  for (const auto &factor : f.factors)
    result.push_back(factor.size);
  return result;
}

bool allSplittable(const ReshapeFactorization &f) {
  for (const auto &factor : f.factors)
    if (!factor.splittable)
      return false;
  return true;
}
} // namespace

TEST(ReshapeFactorizationTest, Identity) {
  ReshapeFactorization f = factorizeReshape({8, 16}, {8, 16});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{8, 16}));
  EXPECT_TRUE(allSplittable(f));
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0}, {1}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0}, {1}}));
}

TEST(ReshapeFactorizationTest, SplitHeads) {
  ReshapeFactorization f = factorizeReshape({8, 128, 768}, {8, 128, 12, 64});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{8, 128, 12, 64}));
  EXPECT_TRUE(allSplittable(f));
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0}, {1}, {2, 3}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0}, {1}, {2}, {3}}));
}

TEST(ReshapeFactorizationTest, MergeDims) {
  ReshapeFactorization f = factorizeReshape({4, 6}, {24});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0}, {1}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0, 1}}));
}

TEST(ReshapeFactorizationTest, PartialOverlapRefines) {
  // [2, 6] -> [4, 3]: factors 2, 2, 3 with 6 = 2x3 and 4 = 2x2.
  ReshapeFactorization f = factorizeReshape({2, 6}, {4, 3});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_TRUE(allSplittable(f));
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0}, {1, 2}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0, 1}, {2}}));
}

TEST(ReshapeFactorizationTest, NoCommonRefinementKeepsDimsWhole) {
  // Cumulative sizes 6, 24 and 4, 24: 4 does not divide 6.
  ReshapeFactorization f = factorizeReshape({6, 4}, {4, 6});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{6, 4, 4, 6}));
  EXPECT_FALSE(f.factors[0].splittable);
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0}, {1}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{2}, {3}}));
}

TEST(ReshapeFactorizationTest, GroupsAreIndependent) {
  // The leading group refines, the trailing one does not.
  ReshapeFactorization f = factorizeReshape({8, 6, 4}, {2, 4, 4, 6});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{2, 4, 6, 4, 4, 6}));
  EXPECT_TRUE(f.factors[0].splittable && f.factors[1].splittable);
  EXPECT_FALSE(f.factors[2].splittable);
  EXPECT_EQ(toDims(f.inputDims), (Dims{{0, 1}, {2}, {3}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0}, {1}, {4}, {5}}));
}

TEST(ReshapeFactorizationTest, UnitDimsMapToNothing) {
  ReshapeFactorization f = factorizeReshape({1, 8, 1}, {8, 1, 1});
  EXPECT_EQ(sizes(f), (std::vector<int64_t>{8}));
  EXPECT_EQ(toDims(f.inputDims), (Dims{{}, {0}, {}}));
  EXPECT_EQ(toDims(f.outputDims), (Dims{{0}, {}, {}}));

  ReshapeFactorization g = factorizeReshape({4, 6}, {4, 1, 2, 3});
  EXPECT_EQ(toDims(g.outputDims), (Dims{{0}, {}, {1}, {2}}));
}

TEST(ReshapeFactorizationTest, ScalarsAndZeroSizes) {
  ReshapeFactorization scalar = factorizeReshape({}, {1, 1});
  EXPECT_TRUE(scalar.factors.empty());
  EXPECT_EQ(toDims(scalar.outputDims), (Dims{{}, {}}));

  ReshapeFactorization empty = factorizeReshape({0, 4}, {4, 0});
  EXPECT_EQ(sizes(empty), (std::vector<int64_t>{0, 4, 4, 0}));
  EXPECT_FALSE(empty.factors[0].splittable);
}

// For random reshapes: every dimension is the product of its factors,
// splittable factors appear on both sides in the same order, and the
// others on exactly one side.
TEST(ReshapeFactorizationTest, RandomReshapesAreConsistent) {
  std::mt19937 rng(1234);
  const int64_t primes[] = {2, 2, 2, 3, 3, 5};
  for (int trial = 0; trial < 2000; ++trial) {
    // Build both shapes from the same multiset of prime factors, grouped
    // differently and with size-1 dimensions sprinkled in.
    std::vector<int64_t> pool;
    int count = 1 + rng() % 6;
    for (int i = 0; i < count; ++i)
      pool.push_back(primes[rng() % 6]);
    auto makeShape = [&](std::vector<int64_t> factors) {
      std::shuffle(factors.begin(), factors.end(), rng);
      std::vector<int64_t> shape;
      for (int64_t p : factors) {
        if (shape.empty() || rng() % 2)
          shape.push_back(p);
        else
          shape.back() *= p;
        if (rng() % 5 == 0)
          shape.push_back(1);
      }
      return shape;
    };
    std::vector<int64_t> input = makeShape(pool), output = makeShape(pool);
    ReshapeFactorization f = factorizeReshape(input, output);

    std::vector<int> uses(f.factors.size(), 0);
    std::vector<unsigned> inputOrder, outputOrder;
    auto check = [&](const std::vector<int64_t> &shape, const auto &dims,
                     std::vector<unsigned> &order) {
      ASSERT_EQ(dims.size(), shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t product = 1;
        for (unsigned factor : dims[d]) {
          product *= f.factors[factor].size;
          ++uses[factor];
          if (f.factors[factor].splittable)
            order.push_back(factor);
        }
        EXPECT_EQ(product, shape[d]);
      }
    };
    check(input, f.inputDims, inputOrder);
    check(output, f.outputDims, outputOrder);
    EXPECT_EQ(inputOrder, outputOrder);
    for (size_t k = 0; k < f.factors.size(); ++k)
      EXPECT_EQ(uses[k], f.factors[k].splittable ? 2 : 1);
  }
}
