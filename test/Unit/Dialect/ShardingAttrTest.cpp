// The C++ side of #loom.mesh and #loom.sharding: builders, accessors, and
// the verifier paths that only C++ code can reach (the textual parser never
// builds such attributes).

#include "loom/Dialect/Loom/IR/LoomAttrs.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {
class ShardingAttrTest : public ::testing::Test {
protected:
  ShardingAttrTest() : builder(&context) { context.loadDialect<LoomDialect>(); }

  /// Runs `make` and returns the error it emitted ("" if none).
  template <typename Fn> std::string errorOf(Fn make) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    make();
    return message;
  }

  std::function<InFlightDiagnostic()> emitter() {
    return [this] { return emitError(UnknownLoc::get(&context)); };
  }

  MeshAttr mesh(ArrayRef<StringRef> names, ArrayRef<int64_t> sizes) {
    SmallVector<StringAttr> attrs;
    for (StringRef name : names)
      attrs.push_back(builder.getStringAttr(name));
    return MeshAttr::get(&context, attrs, sizes);
  }

  MLIRContext context;
  Builder builder;
  FlatSymbolRefAttr meshName = FlatSymbolRefAttr::get(&context, "mesh");
};
} // namespace

TEST_F(ShardingAttrTest, BuilderAndAccessors) {
  ShardingAttr sharding = ShardingAttr::get(
      &context, meshName, {{"dp"}, {}, {"tp", "sp"}}, PartialKind::sum, {"pp"});
  EXPECT_EQ(sharding.getRank(), 3u);
  EXPECT_EQ(sharding.getDimAxes(2), (SmallVector<StringRef>{"tp", "sp"}));
  EXPECT_TRUE(sharding.getDimAxes(1).empty());
  EXPECT_EQ(sharding.getPartialAxesNames(), (SmallVector<StringRef>{"pp"}));
  EXPECT_FALSE(sharding.isFullyReplicated());
  EXPECT_TRUE(
      ShardingAttr::get(&context, meshName, {{}, {}}).isFullyReplicated());

  std::string text;
  llvm::raw_string_ostream os(text);
  os << sharding;
  EXPECT_EQ(text,
            "#loom.sharding<@mesh, [{dp}, {}, {tp, sp}], partial<sum> {pp}>");
}

TEST_F(ShardingAttrTest, MeshQueries) {
  MeshAttr m = mesh({"dp", "pp", "tp"}, {2, 3, 4});
  EXPECT_EQ(m.getNumDevices(), 24);
  EXPECT_EQ(m.getAxisIndex("tp"), 2u);
  EXPECT_EQ(m.getAxisIndex("sp"), std::nullopt);
  EXPECT_EQ(m.getAxisSize("pp"), 3);
}

TEST_F(ShardingAttrTest, MeshVerifierOnlyReachableFromCpp) {
  EXPECT_EQ(errorOf([&] {
              MeshAttr::getChecked(emitter(), &context,
                                   {builder.getStringAttr("dp")}, {2, 4});
            }),
            "mesh has 1 axis names but 2 sizes");
}

TEST_F(ShardingAttrTest, ShardingVerifierOnlyReachableFromCpp) {
  ArrayAttr none = builder.getArrayAttr({});
  auto checked = [&](FlatSymbolRefAttr mesh, ArrayAttr dims, PartialKind kind,
                     ArrayAttr partial) {
    return errorOf([&] {
      ShardingAttr::getChecked(emitter(), &context, mesh, dims, kind, partial);
    });
  };
  EXPECT_EQ(checked(FlatSymbolRefAttr(), none, PartialKind::none, none),
            "sharding needs a mesh symbol");
  EXPECT_EQ(checked(meshName,
                    builder.getArrayAttr({builder.getStringAttr("dp")}),
                    PartialKind::none, none),
            "each sharded dimension must be a list of axes");
  EXPECT_EQ(checked(meshName,
                    builder.getArrayAttr(
                        {builder.getArrayAttr({builder.getI64IntegerAttr(0)})}),
                    PartialKind::none, none),
            "sharding axes must be strings, got 0 : i64");
  EXPECT_EQ(checked(meshName, none, PartialKind::none,
                    builder.getStrArrayAttr({"tp"})),
            "partial axes given without a partial kind");
}

TEST_F(ShardingAttrTest, VerifyAgainstMeshAndType) {
  auto type = RankedTensorType::get({8, 6}, builder.getF32Type());
  MeshAttr m = mesh({"dp", "tp"}, {2, 4});
  auto verify = [&](ShardingAttr sharding, MeshAttr meshAttr, Type t) {
    return errorOf(
        [&] { (void)verifySharding(sharding, meshAttr, t, emitter()); });
  };
  EXPECT_EQ(verify(ShardingAttr::get(&context, meshName, {{"dp", "tp"}, {}}), m,
                   type),
            "");
  EXPECT_EQ(
      verify(ShardingAttr::get(&context, meshName, {{}, {"tp"}}), m, type),
      "dimension 1 of 'tensor<8x6xf32>' has size 6, which 4 shards do "
      "not divide evenly");
  // A mesh built without verification can overflow the shard count.
  MeshAttr huge = mesh({"a", "b"}, {int64_t(1) << 32, int64_t(1) << 32});
  EXPECT_EQ(verify(ShardingAttr::get(&context, meshName, {{"a", "b"}, {}}),
                   huge, type),
            "dimension 0 is split into more shards than fit in 64 bits");
}
