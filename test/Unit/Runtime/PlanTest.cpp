//===- PlanTest.cpp - Writing and parsing runtime plans -------------------===//
//
// Round trips through writePlan/parsePlan, the exact text the writer
// produces, and the parser's diagnostics for corrupt plans: every error must
// name the file and line and say what is wrong, and no input may crash it.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

using namespace loomrt;

namespace {

TensorRef arenaRef(uint64_t offset, DType dtype, std::vector<int64_t> shape) {
  TensorRef ref;
  ref.space = TensorRef::Space::Arena;
  ref.offset = offset;
  ref.dtype = dtype;
  ref.shape = std::move(shape);
  return ref;
}

TensorRef weightRef(uint64_t id, DType dtype, std::vector<int64_t> shape) {
  TensorRef ref = arenaRef(id, dtype, std::move(shape));
  ref.space = TensorRef::Space::Weight;
  return ref;
}

/// Two weights, two ranks, every attribute kind, a program block and locs
/// that need escaping.
Plan samplePlan() {
  Plan plan;
  plan.weights.push_back({"wte", DType::F32, {8, 4}, 0, 128});
  plan.weights.push_back({"bias \"q\"", DType::F16, {3}, 128, 6});
  plan.data.resize(192);
  for (size_t i = 0; i < plan.data.size(); ++i)
    plan.data[i] = static_cast<uint8_t>(i * 7 + 1);

  RankProgram rank0;
  rank0.rank = 0;
  rank0.arenaBytes = 4096;
  rank0.inputs.push_back({"x", arenaRef(0, DType::F32, {2, 8}), 2});
  rank0.inputs.push_back({"whole", arenaRef(192, DType::I64, {4})});
  rank0.outputs.push_back({"y", arenaRef(64, DType::F32, {2, 4})});
  rank0.outputs.push_back({"mask", arenaRef(128, DType::I1, {2, 4})});

  Instruction matmul;
  matmul.kernel = "matmul";
  matmul.inputs = {arenaRef(0, DType::F32, {2, 8}),
                   weightRef(0, DType::F32, {8, 4})};
  matmul.outputs = {arenaRef(64, DType::F32, {2, 4})};
  matmul.attrs["transpose_lhs"] = int64_t(0);
  matmul.attrs["big"] = std::numeric_limits<int64_t>::min();
  matmul.attrs["epsilon"] = 1e-05;
  matmul.attrs["scale"] = 2.0;
  matmul.attrs["tiny"] = std::numeric_limits<double>::denorm_min();
  matmul.attrs["third"] = 1.0 / 3.0;
  matmul.attrs["huge"] = 1e300;
  matmul.attrs["neg_zero"] = -0.0;
  matmul.attrs["neg_inf"] = -std::numeric_limits<double>::infinity();
  matmul.attrs["pos_inf"] = std::numeric_limits<double>::infinity();
  matmul.attrs["not_a_number"] = std::numeric_limits<double>::quiet_NaN();
  matmul.attrs["axes"] = std::vector<int64_t>{-1, 0, 2};
  matmul.attrs["empty"] = std::vector<int64_t>{};
  matmul.attrs["reduction"] = std::string("mean");
  matmul.attrs["dotted"] = std::string("a.b-c_1");
  matmul.loc = "/h.0/attn \"q\" \\path\nnext # not a comment";
  rank0.instructions.push_back(matmul);

  Instruction fused;
  fused.kernel = "elementwise";
  fused.inputs = {arenaRef(64, DType::F32, {2, 4}),
                  weightRef(1, DType::F16, {3})};
  fused.outputs = {arenaRef(64, DType::F32, {2, 4}),
                   arenaRef(128, DType::I1, {2, 4})};
  fused.program.push_back({"add", DType::F32, {0, 1}, {}});
  fused.program.push_back(
      {"gelu", DType::F32, {2}, {{"approximate", std::string("none")}}});
  fused.program.push_back({"const", DType::F32, {}, {{"value", 0.5}}});
  fused.program.push_back(
      {"compare", DType::I1, {3, 4}, {{"direction", std::string("gt")}}});
  fused.yields = {3, 5};
  fused.loc = "/h.0/mlp/Add";
  rank0.instructions.push_back(fused);
  plan.ranks.push_back(rank0);

  RankProgram rank1;
  rank1.rank = 1;
  rank1.arenaBytes = 64;
  rank1.outputs.push_back({"bias", weightRef(1, DType::F16, {3})});
  Instruction copy;
  copy.kernel = "copy";
  copy.inputs = {weightRef(1, DType::I1, {6})};
  copy.outputs = {arenaRef(0, DType::I1, {2, 3})};
  rank1.instructions.push_back(copy);
  plan.ranks.push_back(rank1);
  return plan;
}

void expectRefsEqual(const TensorRef &a, const TensorRef &b) {
  EXPECT_EQ(a.space, b.space);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
}

void expectAttrsEqual(const Attributes &a, const Attributes &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[key, value] : a) {
    SCOPED_TRACE(key);
    auto it = b.find(key);
    ASSERT_NE(it, b.end());
    ASSERT_EQ(value.index(), it->second.index());
    if (const double *d = std::get_if<double>(&value)) {
      double other = std::get<double>(it->second);
      if (std::isnan(*d)) {
        EXPECT_TRUE(std::isnan(other));
      } else {
        EXPECT_EQ(*d, other);
        EXPECT_EQ(std::signbit(*d), std::signbit(other));
      }
    } else {
      EXPECT_EQ(value, it->second);
    }
  }
}

void expectPlansEqual(const Plan &a, const Plan &b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.data, b.data);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(a.weights[i].name, b.weights[i].name);
    EXPECT_EQ(a.weights[i].dtype, b.weights[i].dtype);
    EXPECT_EQ(a.weights[i].shape, b.weights[i].shape);
    EXPECT_EQ(a.weights[i].offset, b.weights[i].offset);
    EXPECT_EQ(a.weights[i].bytes, b.weights[i].bytes);
    EXPECT_EQ(a.weights[i].state, b.weights[i].state);
    EXPECT_EQ(a.weights[i].castOf, b.weights[i].castOf);
    EXPECT_EQ(a.weights[i].sliceOffsets, b.weights[i].sliceOffsets);
    EXPECT_EQ(a.weights[i].globalShape, b.weights[i].globalShape);
  }
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankProgram &ra = a.ranks[r], &rb = b.ranks[r];
    EXPECT_EQ(ra.rank, rb.rank);
    EXPECT_EQ(ra.arenaBytes, rb.arenaBytes);
    ASSERT_EQ(ra.inputs.size(), rb.inputs.size());
    for (size_t i = 0; i < ra.inputs.size(); ++i) {
      EXPECT_EQ(ra.inputs[i].name, rb.inputs[i].name);
      expectRefsEqual(ra.inputs[i].ref, rb.inputs[i].ref);
      EXPECT_EQ(ra.inputs[i].batchOffset, rb.inputs[i].batchOffset);
    }
    ASSERT_EQ(ra.outputs.size(), rb.outputs.size());
    for (size_t i = 0; i < ra.outputs.size(); ++i) {
      EXPECT_EQ(ra.outputs[i].name, rb.outputs[i].name);
      expectRefsEqual(ra.outputs[i].ref, rb.outputs[i].ref);
    }
    ASSERT_EQ(ra.instructions.size(), rb.instructions.size());
    for (size_t i = 0; i < ra.instructions.size(); ++i) {
      const Instruction &ia = ra.instructions[i], &ib = rb.instructions[i];
      EXPECT_EQ(ia.kernel, ib.kernel);
      EXPECT_EQ(ia.loc, ib.loc);
      expectAttrsEqual(ia.attrs, ib.attrs);
      ASSERT_EQ(ia.inputs.size(), ib.inputs.size());
      for (size_t k = 0; k < ia.inputs.size(); ++k)
        expectRefsEqual(ia.inputs[k], ib.inputs[k]);
      ASSERT_EQ(ia.outputs.size(), ib.outputs.size());
      for (size_t k = 0; k < ia.outputs.size(); ++k)
        expectRefsEqual(ia.outputs[k], ib.outputs[k]);
      EXPECT_EQ(ia.yields, ib.yields);
      ASSERT_EQ(ia.program.size(), ib.program.size());
      for (size_t k = 0; k < ia.program.size(); ++k) {
        EXPECT_EQ(ia.program[k].op, ib.program[k].op);
        EXPECT_EQ(ia.program[k].dtype, ib.program[k].dtype);
        EXPECT_EQ(ia.program[k].operands, ib.program[k].operands);
        expectAttrsEqual(ia.program[k].attrs, ib.program[k].attrs);
      }
    }
  }
}

/// Offset of the data section in a written plan.
size_t dataOffset(const std::string &text) {
  size_t line = text.find("\ndata ");
  return text.find('\n', line + 1) + 1;
}

/// The message of parsing `text`, which must fail.
std::string parseError(std::string_view text) {
  StatusOr<Plan> plan = parsePlan(text, "plan.lp");
  EXPECT_FALSE(plan.isOk()) << "parsed:\n" << text;
  return plan.isOk() ? "" : plan.status().message();
}

/// A hand-written plan (no alignment padding, which only the writer adds)
/// whose header lines are `body`, followed by a data section of `dataBytes`
/// bytes.
std::string handPlan(const std::string &body, size_t dataBytes = 16) {
  return "loom-plan 1\n" + body + "data " + std::to_string(dataBytes) + "\n" +
         std::string(dataBytes, '\x01');
}

/// A valid plan; tests replace one piece with a corrupt one. Line 3 is the
/// weight, 5 the input, 6 the output, 7 the kernel.
const std::string kWeights = "weights 1\n"
                             "weight 0 \"w\" f32 [2,2] offset 0 bytes 16\n";
const std::string kRank = "rank 0 arena 64\n"
                          "input \"x\" a0:f32[2,2]\n"
                          "output \"y\" a16:f32[2,2]\n"
                          "kernel matmul a0:f32[2,2] w0:f32[2,2] -> "
                          "a16:f32[2,2]\n"
                          "end\n";

std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

/// The valid plan with `from` replaced by `to` in its header.
std::string corrupt(const std::string &from, const std::string &to) {
  return handPlan(replaced(kWeights + kRank, from, to));
}

} // namespace

//===----------------------------------------------------------------------===//
// Writing and round trips
//===----------------------------------------------------------------------===//

TEST(PlanTest, RoundTrip) {
  Plan plan = samplePlan();
  std::string text = writePlan(plan);
  StatusOr<Plan> parsed = parsePlan(text, "sample.lp");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  expectPlansEqual(plan, *parsed);
  // Writing the parsed plan again gives the same bytes.
  EXPECT_EQ(writePlan(*parsed), text);
}

TEST(PlanTest, InstructionsKnowTheirLines) {
  std::string text = writePlan(samplePlan());
  StatusOr<Plan> parsed = parsePlan(text, "sample.lp");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  // Header, weights (3 lines), rank 0's rank/input/output lines.
  EXPECT_EQ(parsed->ranks[0].instructions[0].line, 10);
  EXPECT_EQ(parsed->ranks[0].instructions[1].line, 11);
  // Four ops, "yield", "}" and "end", then rank 1's rank and output lines.
  EXPECT_EQ(parsed->ranks[1].instructions[0].line, 21);
}

TEST(PlanTest, WritesTheDocumentedText) {
  std::string text = writePlan(samplePlan());
  std::string header = text.substr(0, text.find("\n#") + 1);
  EXPECT_EQ(header,
            "loom-plan 4\n"
            "weights 2\n"
            "weight 0 \"wte\" f32 [8,4] offset 0 bytes 128\n"
            "weight 1 \"bias \\\"q\\\"\" f16 [3] offset 128 bytes 6\n"
            "rank 0 arena 4096\n"
            "input \"x\" a0:f32[2,8] rows=2\n"
            "input \"whole\" a192:i64[4]\n"
            "output \"y\" a64:f32[2,4]\n"
            "output \"mask\" a128:i1[2,4]\n"
            "kernel matmul a0:f32[2,8] w0:f32[8,4] -> a64:f32[2,4] "
            "axes=[-1,0,2] big=-9223372036854775808 dotted=a.b-c_1 empty=[] "
            "epsilon=1e-05 huge=1e+300 neg_inf=-inf neg_zero=-0.0 "
            "not_a_number=nan pos_inf=inf reduction=mean scale=2.0 "
            "third=0.3333333333333333 tiny=5e-324 transpose_lhs=0 "
            "loc \"/h.0/attn \\\"q\\\" \\\\path\\nnext # not a comment\"\n"
            "kernel elementwise a64:f32[2,4] w1:f16[3] -> a64:f32[2,4] "
            "a128:i1[2,4] loc \"/h.0/mlp/Add\" {\n"
            "  %2 = add f32 %0 %1\n"
            "  %3 = gelu f32 %2 approximate=none\n"
            "  %4 = const f32 value=0.5\n"
            "  %5 = compare i1 %3 %4 direction=gt\n"
            "  yield %3 %5\n"
            "}\n"
            "end\n"
            "rank 1 arena 64\n"
            "output \"bias\" w1:f16[3]\n"
            "kernel copy w1:i1[6] -> a0:i1[2,3]\n"
            "end\n");
  EXPECT_EQ(text.substr(dataOffset(text) - 9, 9), "data 192\n");
}

TEST(PlanTest, DataSectionIsAligned) {
  // Every header length modulo 64, and data sizes with differently long
  // "data N" lines.
  for (size_t nameLength = 0; nameLength < 130; ++nameLength) {
    for (size_t dataBytes : {0, 64, 100000}) {
      Plan plan;
      if (dataBytes) {
        plan.weights.push_back({std::string(nameLength, 'n'),
                                DType::I1,
                                {int64_t(dataBytes)},
                                0,
                                dataBytes});
      }
      plan.data.assign(dataBytes, 0xab);
      RankProgram rank;
      rank.arenaBytes = nameLength;
      plan.ranks.push_back(rank);
      std::string text = writePlan(plan);
      size_t offset = dataOffset(text);
      EXPECT_EQ(offset % 64, 0u) << nameLength << " " << dataBytes;
      EXPECT_EQ(text.size() - offset, dataBytes);
      StatusOr<Plan> parsed = parsePlan(text, "aligned.lp");
      ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
      EXPECT_EQ(parsed->data, plan.data);
    }
  }
}

TEST(PlanTest, ParsesHandWrittenPlans) {
  // Comments, blank lines, tabs and CRLF line ends; no alignment padding.
  std::string text = "loom-plan 1   # version\n"
                     "\n"
                     "# the weights\n"
                     "weights 1\r\n"
                     "weight 0 \"w#1\" f32 [2,2] offset 0 bytes 16\n"
                     "rank 0\tarena 64\n"
                     "  input \"x\" a0:f32[2,2]   \n"
                     "kernel elementwise a0:f32[2,2] -> a16:f32[2,2] {\n"
                     "  # comment inside a block\n"
                     "  yield %0\n"
                     "}\n"
                     "end\n"
                     "data 16 # bytes\n" +
                     std::string(16, '\0');
  StatusOr<Plan> plan = parsePlan(text, "hand.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->weights[0].name, "w#1");
  const Instruction &inst = plan->ranks[0].instructions[0];
  EXPECT_EQ(inst.line, 8);
  EXPECT_TRUE(inst.program.empty());
  EXPECT_EQ(inst.yields, std::vector<int>{0});
}

TEST(PlanTest, LoadsFiles) {
  std::string path = ::testing::TempDir() + "/loom-plan-test.lp";
  std::string text = writePlan(samplePlan());
  std::FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
  StatusOr<Plan> plan = loadPlan(path);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  expectPlansEqual(samplePlan(), *plan);
  std::remove(path.c_str());

  StatusOr<Plan> missing = loadPlan("/nonexistent/plan.lp");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            "cannot open '/nonexistent/plan.lp': No such file or directory");
}

TEST(PlanTest, LooksLikePlan) {
  EXPECT_TRUE(looksLikePlan(writePlan(samplePlan())));
  EXPECT_TRUE(looksLikePlan("loom-plan 7\n"));
  EXPECT_FALSE(looksLikePlan(""));
  EXPECT_FALSE(looksLikePlan("loom-pla"));
  EXPECT_FALSE(looksLikePlan("module {\n}"));
  EXPECT_FALSE(looksLikePlan("\x08\x07\x12\x04loom"));
}

//===----------------------------------------------------------------------===//
// Corrupt plans
//===----------------------------------------------------------------------===//

TEST(PlanErrorTest, TheBaseIsValid) {
  StatusOr<Plan> plan = parsePlan(handPlan(kWeights + kRank), "plan.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
}

TEST(PlanErrorTest, Header) {
  EXPECT_EQ(parseError(""), "plan.lp:1: empty file, expected 'loom-plan 4'");
  EXPECT_EQ(parseError("PK\x03\x04garbage"),
            "plan.lp:1: not a plan: the file does not start with 'loom-plan'");
  EXPECT_EQ(parseError("loom-planet 1\n"),
            "plan.lp:1: expected 'loom-plan VERSION', got 'loom-planet'");
  EXPECT_EQ(parseError("loom-plan 5\nwhatever the future holds"),
            "plan.lp:1: plan version 5 is newer than this runtime (4)");
  EXPECT_EQ(parseError("loom-plan 0\n"),
            "plan.lp:1: unsupported plan version 0");
  EXPECT_EQ(parseError("loom-plan one\n"),
            "plan.lp:1: expected a plan version, got 'one'");
  EXPECT_EQ(parseError("loom-plan 99999999999999999999999\n"),
            "plan.lp:1: '99999999999999999999999' is out of range for a plan "
            "version");
  EXPECT_EQ(parseError("loom-plan 1\n"),
            "plan.lp:2: unexpected end of file, expected 'weights COUNT'");
  EXPECT_EQ(parseError("loom-plan 1\nweights -1\n"),
            "plan.lp:2: '-1' is out of range for a weight count");
}

TEST(PlanErrorTest, Data) {
  std::string valid = handPlan(kWeights + kRank);
  EXPECT_EQ(parseError(valid.substr(0, valid.size() - 6)),
            "plan.lp:9: truncated file: the data section should have 16 "
            "bytes, but only 10 follow the data line");
  EXPECT_EQ(parseError(valid + "xyz"),
            "plan.lp:9: the data section should have 16 bytes, but 19 follow "
            "the data line");
  EXPECT_EQ(parseError("loom-plan 1\n" + kWeights + kRank + "data 0"),
            "plan.lp:9: missing newline after the data line");
  EXPECT_EQ(parseError("loom-plan 1\n" + kWeights + kRank + "data x\n"),
            "plan.lp:9: expected a data size, got 'x'");
  EXPECT_EQ(parseError("loom-plan 1\n" + kWeights + kRank),
            "plan.lp:9: unexpected end of file, expected 'rank' or 'data'");
  EXPECT_EQ(parseError(handPlan(kWeights + kRank, 8)),
            "plan.lp:3: weight 0 ends at byte 16, past the data section of 8 "
            "bytes");
}

TEST(PlanErrorTest, Weights) {
  EXPECT_EQ(parseError(corrupt("offset 0", "offset 8")),
            "plan.lp:3: weight 0 offset 8 is not a multiple of 64");
  EXPECT_EQ(parseError(corrupt("bytes 16", "bytes 12")),
            "plan.lp:3: weight 0 has 12 bytes, but f32[2,2] needs 16");
  EXPECT_EQ(parseError(corrupt("weight 0", "weight 1")),
            "plan.lp:3: weight id 1 where 0 was expected (ids count up from "
            "0)");
  EXPECT_EQ(parseError(corrupt("f32 [2,2] offset", "f33 [2,2] offset")),
            "plan.lp:3: unknown dtype 'f33' (expected f16, bf16, f32, f64, "
            "i1, i32 or i64)");
  EXPECT_EQ(parseError(corrupt("\"w\"", "w")),
            "plan.lp:3: expected a weight name in double quotes, got 'w'");
  EXPECT_EQ(parseError(corrupt(" bytes 16", "")),
            "plan.lp:3: expected 'weight ID \"NAME\" DTYPE SHAPE offset INT "
            "bytes INT [state] [cast_of ID] [slice [OFFSET,...] of SHAPE]'");
  EXPECT_EQ(parseError(corrupt("weights 1", "weights 2")),
            "plan.lp:4: expected 2 weight lines, got 'rank'");
  EXPECT_EQ(parseError(corrupt("weights 1", "weights 0")),
            "plan.lp:3: more weight lines than the 0 announced");
  // A huge count is not trusted for an allocation.
  EXPECT_EQ(parseError(corrupt("weights 1", "weights 9223372036854775807")),
            "plan.lp:4: expected 9223372036854775807 weight lines, got "
            "'rank'");
}

TEST(PlanErrorTest, Shapes) {
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[2,-2] offset")),
            "plan.lp:3: negative dimension -2 in shape '[2,-2]'");
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[2,x] offset")),
            "plan.lp:3: expected a list like [1,2,3] in a shape, got '[2,x]'");
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[2,2 offset")),
            "plan.lp:3: expected a list like [1,2,3] in a shape, got '[2,2'");
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[2,,2] offset")),
            "plan.lp:3: expected a list like [1,2,3] in a shape, got "
            "'[2,,2]'");
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[99999999999999999999] "
                                               "offset")),
            "plan.lp:3: integer '99999999999999999999' in a shape is out of "
            "range");
  // 2^62 f32 elements are 2^64 bytes.
  EXPECT_EQ(parseError(corrupt("[2,2] offset", "[4611686018427387904] "
                                               "offset")),
            "plan.lp:3: shape '[4611686018427387904]' of f32 is too large");
  // The product overflows before the zero makes it empty.
  EXPECT_EQ(parseError(corrupt("a16:f32[2,2]\nkernel",
                               "a16:f32[4294967296,4294967296,0]\nkernel")),
            "plan.lp:6: shape '[4294967296,4294967296,0]' of f32 is too "
            "large");
}

TEST(PlanTest, GradientBytesRoundTrip) {
  // A rank line may say the bytes of the gradients the rank holds (ZeRO
  // stages 2 and 3 hold shards); without it they are unknown (-1).
  StatusOr<Plan> plain = parsePlan(handPlan(kWeights + kRank), "plan.lp");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->ranks[0].gradientBytes, -1);
  EXPECT_EQ(writePlan(*plain).find("gradients"), std::string::npos);
  StatusOr<Plan> given =
      parsePlan(corrupt("arena 64\n", "arena 64 gradients 40\n"), "plan.lp");
  ASSERT_TRUE(given.isOk()) << given.status().message();
  EXPECT_EQ(given->ranks[0].gradientBytes, 40);
  StatusOr<Plan> again = parsePlan(writePlan(*given), "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->ranks[0].gradientBytes, 40);
  EXPECT_EQ(parseError(corrupt("arena 64\n", "arena 64 grads 40\n")),
            "plan.lp:4: expected 'rank INT arena INT [gradients INT]'");
  EXPECT_EQ(parseError(corrupt("arena 64\n", "arena 64 gradients -1\n")),
            "plan.lp:4: '-1' is out of range for a gradient size");
}

TEST(PlanTest, ActionsRoundTrip) {
  // A pipelined plan's instructions name their schedule action.
  StatusOr<Plan> plan =
      parsePlan(replaced(handPlan(kWeights + kRank), "a16:f32[2,2]\nend",
                         "a16:f32[2,2] loc \"/h.0/mm\" action \"B1.3\"\nend"),
                "plan.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->ranks[0].instructions[0].loc, "/h.0/mm");
  EXPECT_EQ(plan->ranks[0].instructions[0].action, "B1.3");
  StatusOr<Plan> again = parsePlan(writePlan(*plan), "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->ranks[0].instructions[0].action, "B1.3");
}

TEST(PlanErrorTest, References) {
  EXPECT_EQ(parseError(corrupt("arena 64", "arena 24")),
            "plan.lp:6: arena reference a16:f32[2,2] ends at byte 32, past "
            "the rank's arena of 24 bytes");
  EXPECT_EQ(parseError(corrupt("w0:f32[2,2]", "w3:f32[2,2]")),
            "plan.lp:7: weight reference w3:f32[2,2] names weight 3, but the "
            "plan has 1 weights");
  EXPECT_EQ(parseError(corrupt("w0:f32[2,2]", "w0:f32[3]")),
            "plan.lp:7: weight reference w0:f32[3] views 12 bytes, but "
            "weight 0 has 16 bytes");
  // Another dtype of the same byte size is a valid view.
  EXPECT_TRUE(parsePlan(corrupt("w0:f32[2,2]", "w0:i64[2]"), "plan.lp").isOk());
  EXPECT_EQ(parseError(corrupt("a0:f32[2,2] w0", "b0:f32[2,2] w0")),
            "plan.lp:7: expected a tensor reference like a0:f32[8,128] or "
            "w0:f32[8], got 'b0:f32[2,2]'");
  EXPECT_EQ(parseError(corrupt("a0:f32[2,2] w0", "a0f32[2,2] w0")),
            "plan.lp:7: expected a tensor reference like a0:f32[8,128] or "
            "w0:f32[8], got 'a0f32[2,2]'");
  EXPECT_EQ(parseError(corrupt("a0:f32[2,2] w0", "a-1:f32[2,2] w0")),
            "plan.lp:7: '-1' is out of range for an offset or weight id");
  EXPECT_EQ(parseError(corrupt("a0:f32[2,2] w0", "a0:f32 w0")),
            "plan.lp:7: expected a tensor reference like a0:f32[8,128] or "
            "w0:f32[8], got 'a0:f32'");
  EXPECT_EQ(parseError(corrupt("a0:f32[2,2] w0", "a0:[2,2] w0")),
            "plan.lp:7: unknown dtype '' (expected f16, bf16, f32, f64, i1, "
            "i32 or i64)");
}

TEST(PlanErrorTest, HugeNumbers) {
  // Offsets and sizes near 2^63 must not wrap around in the bounds checks.
  EXPECT_EQ(parseError(corrupt("arena 64\ninput \"x\" a0:f32[2,2]",
                               "arena 9223372036854775807\ninput \"x\" "
                               "a9223372036854775807:f64[1]")),
            "plan.lp:5: arena reference a9223372036854775807:f64[1] ends at "
            "byte 9223372036854775815, past the rank's arena of "
            "9223372036854775807 bytes");
  EXPECT_EQ(
      parseError(corrupt("a0:f32[2,2] w0", "a9223372036854775808:f32[2,2] w0")),
      "plan.lp:7: '9223372036854775808' is out of range for an offset or "
      "weight id");
  EXPECT_EQ(
      parseError(corrupt("w0:f32[2,2]", "w18446744073709551615:f32[2,2]")),
      "plan.lp:7: '18446744073709551615' is out of range for an offset or "
      "weight id");
  EXPECT_EQ(parseError(corrupt("rank 0", "rank 9223372036854775807")),
            "plan.lp:4: rank 9223372036854775807 where rank 0 was expected "
            "(ranks appear in order from 0)");
  EXPECT_EQ(parseError(corrupt("offset 0", "offset 9223372036854775744")),
            "plan.lp:3: weight 0 ends at byte 9223372036854775760, past the "
            "data section of 16 bytes");
  EXPECT_EQ(
      parseError("loom-plan 1\n" + kWeights + kRank +
                 "data 99999999999999999999\n"),
      "plan.lp:9: '99999999999999999999' is out of range for a data size");
}

TEST(PlanErrorTest, Ranks) {
  EXPECT_EQ(parseError(corrupt("rank 0", "rank 1")),
            "plan.lp:4: rank 1 where rank 0 was expected (ranks appear in "
            "order from 0)");
  EXPECT_EQ(parseError(handPlan(kWeights + kRank + kRank)),
            "plan.lp:9: rank 0 where rank 1 was expected (ranks appear in "
            "order from 0)");
  EXPECT_EQ(parseError(handPlan(kWeights)),
            "plan.lp:4: a plan needs at least one rank");
  EXPECT_EQ(parseError(corrupt("arena 64", "arena")),
            "plan.lp:4: expected 'rank INT arena INT [gradients INT]'");
  EXPECT_EQ(parseError(corrupt("arena 64", "arena -64")),
            "plan.lp:4: '-64' is out of range for an arena size");
  EXPECT_EQ(
      parseError("loom-plan 1\n" + kWeights + replaced(kRank, "end\n", "")),
      "plan.lp:8: unexpected end of file, expected 'end' of rank 0");
  EXPECT_EQ(parseError(corrupt("end\n", "")),
            "plan.lp:8: missing 'end' of rank 0 before 'data'");
  EXPECT_EQ(
      parseError(handPlan(kWeights + replaced(kRank, "end\n", "") + kRank)),
      "plan.lp:8: missing 'end' of rank 0 before 'rank'");
  EXPECT_EQ(parseError(corrupt("end\n", "end now\n")),
            "plan.lp:8: expected 'end'");
  EXPECT_EQ(parseError(corrupt("end\n", "send\n")),
            "plan.lp:8: expected 'input', 'output', 'kernel', 'collective' or "
            "'end', got "
            "'send'");
}

TEST(PlanErrorTest, Bindings) {
  EXPECT_EQ(parseError(corrupt("output \"y\"", "input \"x\"")),
            "plan.lp:6: duplicate input 'x'");
  EXPECT_EQ(parseError(corrupt("output \"y\" a16:f32[2,2]\n",
                               "output \"y\" a16:f32[2,2]\n"
                               "output \"y\" a0:f32[2,2]\n")),
            "plan.lp:7: duplicate output 'y'");
  EXPECT_EQ(parseError(corrupt("end\n", "input \"z\" a0:f32[1]\nend\n")),
            "plan.lp:8: 'input' after 'output' or 'kernel' lines");
  EXPECT_EQ(parseError(corrupt("end\n", "output \"z\" a0:f32[1]\nend\n")),
            "plan.lp:8: 'output' after 'kernel' lines");
  EXPECT_EQ(
      parseError(corrupt("input \"x\" a0:f32[2,2]", "input \"x\" w0:f32[2,2]")),
      "plan.lp:5: input 'x' must be an arena reference");
  EXPECT_EQ(parseError(corrupt("input \"x\" a0:f32[2,2]", "input \"x\"")),
            "plan.lp:5: expected 'input \"NAME\" REF'");
  // A weight may be a graph output.
  EXPECT_TRUE(parsePlan(corrupt("output \"y\" a16:f32[2,2]",
                                "output \"y\" w0:f32[2,2]"),
                        "plan.lp")
                  .isOk());
}

TEST(PlanErrorTest, BatchRows) {
  // Version 3: an input may say which rows of the step's batch it holds.
  auto v3 = [](const std::string &input) {
    return replaced(
        handPlan(replaced(kWeights + kRank, "input \"x\" a0:f32[2,2]", input)),
        "loom-plan 1", "loom-plan 3");
  };
  StatusOr<Plan> plan = parsePlan(v3("input \"x\" a0:f32[2,2] rows=6"), "p");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->ranks[0].inputs[0].batchOffset, 6);
  plan = parsePlan(v3("input \"x\" a0:f32[2,2]"), "p");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->ranks[0].inputs[0].batchOffset, -1);
  EXPECT_EQ(parseError(corrupt("input \"x\" a0:f32[2,2]",
                               "input \"x\" a0:f32[2,2] rows=0")),
            "plan.lp:5: 'rows=' needs plan version 3");
  EXPECT_EQ(parseError(v3("input \"x\" a0:f32[2,2] rows=-1")),
            "plan.lp:5: '-1' is out of range for a batch row offset");
  EXPECT_EQ(parseError(v3("input \"x\" a0:f32[2,2] rows=two")),
            "plan.lp:5: expected a batch row offset, got 'two'");
  EXPECT_EQ(parseError(v3("input \"x\" a0:f32[2,2] offset=2")),
            "plan.lp:5: expected 'rows=OFFSET' after input 'x', got "
            "'offset=2'");
  EXPECT_EQ(parseError(v3("input \"x\" a0:f32[] rows=0")),
            "plan.lp:5: input 'x' is a scalar and has no batch rows");
  EXPECT_EQ(parseError(replaced(v3("input \"x\" a0:f32[2,2]"),
                                "output \"y\" a16:f32[2,2]",
                                "output \"y\" a16:f32[2,2] rows=0")),
            "plan.lp:6: expected 'output \"NAME\" REF'");
}

TEST(PlanErrorTest, Strings) {
  EXPECT_EQ(parseError(corrupt("\"x\"", "\"x")),
            "plan.lp:5: unterminated string");
  EXPECT_EQ(parseError(corrupt("\"x\" a0:f32[2,2]", "\"x\\")),
            "plan.lp:5: unterminated string");
  EXPECT_EQ(parseError(corrupt("\"x\"", "\"x\\t\"")),
            "plan.lp:5: unknown escape '\\t' in a string");
  EXPECT_EQ(parseError(corrupt("\"x\"", "\"x\"a0:f32[2,2]")),
            "plan.lp:5: expected a space after a string");
  EXPECT_EQ(parseError(corrupt("\"x\"", "x\"")),
            "plan.lp:5: unexpected '\"' in 'x\"'");
  // Binary garbage is shown escaped.
  EXPECT_EQ(parseError(corrupt("end\n", "\x01\xff\n")),
            "plan.lp:8: expected 'input', 'output', 'kernel', 'collective' or "
            "'end', got "
            "'\\x01\\xff'");
}

TEST(PlanErrorTest, Kernels) {
  const std::string kernel =
      "kernel matmul a0:f32[2,2] w0:f32[2,2] -> a16:f32[2,2]";
  auto withKernel = [&](const std::string &line) {
    return corrupt(kernel, line);
  };
  EXPECT_EQ(parseError(withKernel("kernel")),
            "plan.lp:7: expected a name after 'kernel'");
  EXPECT_EQ(parseError(withKernel("kernel \"matmul\" -> a0:f32[1]")),
            "plan.lp:7: expected a name after 'kernel'");
  EXPECT_EQ(parseError(withKernel("kernel matmul a0:f32[2,2]")),
            "plan.lp:7: missing '->' between a kernel's inputs and outputs");
  EXPECT_EQ(parseError(withKernel(kernel + " axis=1 a0:f32[1]")),
            "plan.lp:7: unexpected 'a0:f32[1]' in a kernel line (expected "
            "inputs -> outputs, then attributes, 'loc \"...\"', 'action "
            "\"...\"' and '{')");
  EXPECT_EQ(parseError(withKernel(kernel + " loc \"a\" axis=1")),
            "plan.lp:7: unexpected 'axis=1' in a kernel line (expected "
            "inputs -> outputs, then attributes, 'loc \"...\"', 'action "
            "\"...\"' and '{')");
  EXPECT_EQ(parseError(withKernel(kernel + " loc")),
            "plan.lp:7: missing string after 'loc'");
  EXPECT_EQ(parseError(withKernel(kernel + " loc here")),
            "plan.lp:7: expected a loc in double quotes, got 'here'");
  EXPECT_EQ(parseError(withKernel(kernel + " loc \"a\" action")),
            "plan.lp:7: missing string after 'action'");
  EXPECT_EQ(parseError(withKernel(kernel + " action \"F0.1\" loc \"a\"")),
            "plan.lp:7: unexpected 'loc' in a kernel line (expected inputs "
            "-> outputs, then attributes, 'loc \"...\"', 'action \"...\"' "
            "and '{')");
  EXPECT_EQ(parseError(withKernel(kernel + " axis=1 axis=2")),
            "plan.lp:7: duplicate attribute 'axis'");
  EXPECT_EQ(parseError(withKernel(kernel + " mode=@x")),
            "plan.lp:7: bad value '@x' for attribute 'mode' (expected an "
            "integer, a float, a list like [1,2] or a word)");
  EXPECT_EQ(parseError(withKernel(kernel + " mode=")),
            "plan.lp:7: bad value '' for attribute 'mode' (expected an "
            "integer, a float, a list like [1,2] or a word)");
  EXPECT_EQ(parseError(withKernel(kernel + " 1x=2")),
            "plan.lp:7: bad attribute name '1x'");
  EXPECT_EQ(parseError(withKernel(kernel + " x=1e999")),
            "plan.lp:7: float '1e999' of attribute 'x' is out of range");
  EXPECT_EQ(parseError(withKernel(kernel + " x=1.5e")),
            "plan.lp:7: bad value '1.5e' for attribute 'x' (expected an "
            "integer, a float, a list like [1,2] or a word)");
  EXPECT_EQ(parseError(withKernel(kernel + " x=99999999999999999999")),
            "plan.lp:7: integer '99999999999999999999' of attribute 'x' is "
            "out of range");
  EXPECT_EQ(parseError(withKernel(kernel + " x=[1,a]")),
            "plan.lp:7: expected a list like [1,2,3] in attribute 'x', got "
            "'[1,a]'");
}

TEST(PlanErrorTest, Programs) {
  const std::string kernel =
      "kernel matmul a0:f32[2,2] w0:f32[2,2] -> a16:f32[2,2]";
  auto withBlock = [&](const std::string &lines) {
    return corrupt(kernel, kernel + " {\n" + lines);
  };
  EXPECT_TRUE(parsePlan(withBlock("%2 = add f32 %0 %1\nyield %2\n}"), "plan.lp")
                  .isOk());
  EXPECT_EQ(parseError(withBlock("%2 = add f32 %0 %5\nyield %2\n}")),
            "plan.lp:8: program value %5 is used before it is defined");
  EXPECT_EQ(parseError(withBlock("%2 = add f32 %0 %2\nyield %2\n}")),
            "plan.lp:8: program value %2 is used before it is defined");
  EXPECT_EQ(parseError(withBlock("%2 = add f32 %0 %1\nyield %3\n}")),
            "plan.lp:9: program value %3 is used before it is defined");
  EXPECT_EQ(parseError(withBlock("%3 = add f32 %0 %1\nyield %3\n}")),
            "plan.lp:8: program line defines %3, expected %2 (values are "
            "numbered in order)");
  EXPECT_EQ(parseError(withBlock("%2 = add f32 %0 %1\n}")),
            "plan.lp:9: program block without 'yield'");
  EXPECT_EQ(parseError(withBlock("yield %0\nyield %1\n}")),
            "plan.lp:9: expected '}' after 'yield'");
  EXPECT_EQ(parseError(withBlock("yield\n}")),
            "plan.lp:8: 'yield' needs at least one value");
  EXPECT_EQ(parseError(withBlock("yield 0\n}")),
            "plan.lp:8: expected a program value like %0, got '0'");
  EXPECT_EQ(parseError(withBlock("%2 = add f33 %0 %1\nyield %2\n}")),
            "plan.lp:8: unknown dtype 'f33' (expected f16, bf16, f32, f64, "
            "i1, i32 or i64)");
  EXPECT_EQ(parseError(withBlock("%2 = 9add f32 %0\nyield %2\n}")),
            "plan.lp:8: bad program op '9add'");
  EXPECT_EQ(parseError(withBlock("%2 add f32 %0 %1\nyield %2\n}")),
            "plan.lp:8: expected '%N = OP DTYPE OPERANDS ATTRIBUTES', 'yield "
            "VALUES' or '}' in a program block");
  EXPECT_EQ(parseError(withBlock("%2 = gelu f32 %0 approximate=tanh %1\n"
                                 "yield %2\n}")),
            "plan.lp:8: expected an attribute like key=value, got '%1'");
  EXPECT_EQ(parseError(withBlock("yield %0\n} }")), "plan.lp:9: expected '}'");
  // The block is never closed: blame the kernel line.
  EXPECT_EQ(parseError(withBlock("yield %0\nend\n")),
            "plan.lp:9: expected '}' after 'yield'");
  EXPECT_EQ(parseError("loom-plan 1\n" + kWeights + "rank 0 arena 64\n" +
                       kernel + " {\nyield %0\n"),
            "plan.lp:5: program block without a closing '}'");
}

//===----------------------------------------------------------------------===//
// Robustness: no input may crash the parser (run under ASan/UBSan).
//===----------------------------------------------------------------------===//

TEST(PlanErrorTest, EveryTruncationFails) {
  std::string text = writePlan(samplePlan());
  for (size_t size = 0; size < text.size(); ++size) {
    StatusOr<Plan> plan = parsePlan(text.substr(0, size), "cut.lp");
    ASSERT_FALSE(plan.isOk()) << size;
    EXPECT_EQ(plan.status().message().rfind("cut.lp:", 0), 0u)
        << plan.status().message();
  }
}

TEST(PlanErrorTest, ByteMutationsDoNotCrash) {
  std::string text = writePlan(samplePlan());
  size_t header = dataOffset(text);
  const char replacements[] = {'\0', '\n', ' ', '9', '-', '"', '\\', '[',
                               ']',  ',',  '%', '=', '#', '{', '}',  '\xff'};
  for (size_t pos = 0; pos < header; ++pos) {
    for (char c : replacements) {
      std::string mutated = text;
      mutated[pos] = c;
      StatusOr<Plan> plan = parsePlan(mutated, "mutated.lp");
      if (!plan.isOk()) {
        EXPECT_EQ(plan.status().message().rfind("mutated.lp:", 0), 0u)
            << plan.status().message();
      }
    }
  }
}

TEST(PlanErrorTest, GarbageFails) {
  std::string garbage = "loom-plan 1\n";
  uint64_t state = 42;
  for (int i = 0; i < 4096; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    garbage += static_cast<char>(state >> 56);
  }
  std::string message = parseError(garbage);
  EXPECT_EQ(message.rfind("plan.lp:", 0), 0u) << message;
}

//===----------------------------------------------------------------------===//
// State weights (training)
//===----------------------------------------------------------------------===//

namespace {
std::string statePlan(const char *weightFlag) {
  return std::string("loom-plan 1\n"
                     "weights 1\n"
                     "weight 0 \"w\" f32 [2] offset 0 bytes 8") +
         weightFlag +
         "\n"
         "rank 0 arena 64\n"
         "kernel elementwise w0:f32[2] -> w0:f32[2] {\n"
         "  %1 = add f32 %0 %0\n"
         "  yield %1\n"
         "}\n"
         "end\n"
         "data 8\n" +
         std::string(8, '\0');
}
} // namespace

TEST(PlanTest, StateWeightsMayBeWritten) {
  StatusOr<Plan> plan = parsePlan(statePlan(" state"), "state.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_TRUE(plan->weights[0].state);
  std::string text = writePlan(*plan);
  EXPECT_NE(text.find("weight 0 \"w\" f32 [2] offset 0 bytes 8 state\n"),
            std::string::npos);
  StatusOr<Plan> again = parsePlan(text, "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_TRUE(again->weights[0].state);
}

TEST(PlanErrorTest, OnlyStateWeightsMayBeWritten) {
  StatusOr<Plan> plan = parsePlan(statePlan(""), "plan.lp");
  ASSERT_FALSE(plan.isOk());
  EXPECT_EQ(plan.status().message(),
            "plan.lp:5: kernel output w0:f32[2] writes weight 0, which is not "
            "marked 'state' (read-only)");
  StatusOr<Plan> flagged = parsePlan(statePlan(" frozen"), "plan.lp");
  ASSERT_FALSE(flagged.isOk());
  EXPECT_EQ(flagged.status().message(),
            "plan.lp:3: expected 'weight ID \"NAME\" DTYPE SHAPE offset INT "
            "bytes INT [state] [cast_of ID] [slice [OFFSET,...] of SHAPE]'");
}

namespace {
/// Weight 1 is the bf16 copy of weight 0; FLAGS follow weight 1's bytes.
std::string copyPlan(const std::string &sourceLine, const std::string &flags) {
  return "loom-plan 2\n"
         "weights 2\n" +
         sourceLine +
         "\n"
         "weight 1 \"w.bf16\" bf16 [2] offset 64 bytes 4" +
         flags +
         "\n"
         "rank 0 arena 64\n"
         "end\n"
         "data 128\n" +
         std::string(128, '\0');
}
const std::string kStateSource =
    "weight 0 \"w\" f32 [2] offset 0 bytes 8 state";
} // namespace

TEST(PlanTest, CopiesNameTheirSource) {
  StatusOr<Plan> plan =
      parsePlan(copyPlan(kStateSource, " state cast_of 0"), "copy.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->weights[0].castOf, -1);
  EXPECT_EQ(plan->weights[1].castOf, 0);
  std::string text = writePlan(*plan);
  EXPECT_NE(text.find("weight 1 \"w.bf16\" bf16 [2] offset 64 bytes 4 state "
                      "cast_of 0\n"),
            std::string::npos);
  StatusOr<Plan> again = parsePlan(text, "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->weights[1].castOf, 0);
  // Read-only copies of read-only weights too.
  EXPECT_TRUE(parsePlan(copyPlan("weight 0 \"w\" f64 [2] offset 0 bytes 16",
                                 " cast_of 0"),
                        "copy.lp")
                  .isOk());
}

TEST(PlanErrorTest, Copies) {
  auto error = [](const std::string &source, const std::string &flags) {
    StatusOr<Plan> plan = parsePlan(copyPlan(source, flags), "plan.lp");
    return plan.isOk() ? std::string("parsed") : plan.status().message();
  };
  EXPECT_EQ(error(kStateSource, " state cast_of 1"),
            "plan.lp:4: weight 1 is a cast of weight 1, which is not another "
            "weight of the plan");
  EXPECT_EQ(error(kStateSource, " state cast_of 2"),
            "plan.lp:4: weight 1 is a cast of weight 2, which is not another "
            "weight of the plan");
  EXPECT_EQ(error("weight 0 \"w\" i32 [2] offset 0 bytes 8 state",
                  " state cast_of 0"),
            "plan.lp:4: weight 1 is a cast of weight 0 (i32), but copies are "
            "bf16 casts of f32 or f64 weights that are no copies themselves");
  EXPECT_EQ(error("weight 0 \"w\" f32 [1,2] offset 0 bytes 8 state",
                  " state cast_of 0"),
            "plan.lp:4: weight 1 is a cast of weight 0 of another shape or "
            "another kind (state or not)");
  EXPECT_EQ(error(kStateSource, " cast_of 0"),
            "plan.lp:4: weight 1 is a cast of weight 0 of another shape or "
            "another kind (state or not)");
  EXPECT_EQ(error(kStateSource, " state cast_of"),
            "plan.lp:4: expected 'weight ID \"NAME\" DTYPE SHAPE offset INT "
            "bytes INT [state] [cast_of ID] [slice [OFFSET,...] of SHAPE]'");
  EXPECT_EQ(error(kStateSource, " cast_of 0 state"),
            "plan.lp:4: expected 'weight ID \"NAME\" DTYPE SHAPE offset INT "
            "bytes INT [state] [cast_of ID] [slice [OFFSET,...] of SHAPE]'");
  EXPECT_EQ(error(kStateSource, " state cast_of -1"),
            "plan.lp:4: '-1' is out of range for a weight id");
}

//===----------------------------------------------------------------------===//
// Slices (version 4)
//===----------------------------------------------------------------------===//

namespace {

/// Weights 0 and 1 are the two row halves of "w" f32[4,2] (rank 0 reads
/// one, rank 1 the other); `extra` follows as further weight lines (ids
/// from 2). `first` and `second` replace the slices' specifications.
std::string slicePlan(const std::string &first = "slice [0,0] of [4,2]",
                      const std::string &second = "slice [2,0] of [4,2]",
                      const std::string &extra = "", int count = 2,
                      int version = 4) {
  return "loom-plan " + std::to_string(version) + "\nweights " +
         std::to_string(count) +
         "\n"
         "weight 0 \"w\" f32 [2,2] offset 0 bytes 16 state " +
         first +
         "\n"
         "weight 1 \"w\" f32 [2,2] offset 64 bytes 16 state " +
         second + "\n" + extra +
         "rank 0 arena 64\n"
         "kernel copy w0:f32[2,2] -> a0:f32[2,2]\n"
         "end\n"
         "rank 1 arena 64\n"
         "kernel copy w1:f32[2,2] -> a0:f32[2,2]\n"
         "end\n"
         "data 256\n" +
         std::string(256, '\0');
}

} // namespace

TEST(PlanTest, SlicesRoundTrip) {
  StatusOr<Plan> plan = parsePlan(slicePlan(), "slices.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  const Weight &second = plan->weights[1];
  EXPECT_TRUE(second.isSlice());
  EXPECT_EQ(second.name, "w");
  EXPECT_EQ(second.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(second.sliceOffsets, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(second.globalShape, (std::vector<int64_t>{4, 2}));
  std::string text = writePlan(*plan);
  EXPECT_NE(text.find("weight 1 \"w\" f32 [2,2] offset 64 bytes 16 state "
                      "slice [2,0] of [4,2]\n"),
            std::string::npos);
  StatusOr<Plan> again = parsePlan(text, "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  expectPlansEqual(*plan, *again);
  EXPECT_EQ(writePlan(*again), text);
  // Column blocks, a slice that is the whole tensor, and a bf16 copy of
  // each slice (the same slice).
  EXPECT_TRUE(
      parsePlan(slicePlan("slice [0,0] of [2,4]", "slice [0,2] of [2,4]"),
                "columns.lp")
          .isOk());
  StatusOr<Plan> copies = parsePlan(
      slicePlan("slice [0,0] of [4,2]", "slice [2,0] of [4,2]",
                "weight 2 \"w.bf16\" bf16 [2,2] offset 128 bytes 8 state "
                "cast_of 0 slice [0,0] of [4,2]\n"
                "weight 3 \"w.bf16\" bf16 [2,2] offset 192 bytes 8 state "
                "cast_of 1 slice [2,0] of [4,2]\n",
                4),
      "copies.lp");
  ASSERT_TRUE(copies.isOk()) << copies.status().message();
  EXPECT_EQ(copies->weights[3].castOf, 1);
  std::string whole = "loom-plan 4\nweights 1\n"
                      "weight 0 \"w\" f32 [2,2] offset 0 bytes 16 slice "
                      "[0,0] of [2,2]\n"
                      "rank 0 arena 64\nend\ndata 16\n" +
                      std::string(16, '\0');
  EXPECT_TRUE(parsePlan(whole, "whole.lp").isOk());
}

TEST(PlanErrorTest, Slices) {
  auto error = [](const std::string &first, const std::string &second,
                  const std::string &extra = "", int count = 2) {
    StatusOr<Plan> plan =
        parsePlan(slicePlan(first, second, extra, count), "plan.lp");
    return plan.isOk() ? std::string("parsed") : plan.status().message();
  };
  const std::string top = "slice [0,0] of [4,2]";
  const std::string bottom = "slice [2,0] of [4,2]";
  // Overlap, gap, out of bounds.
  EXPECT_EQ(error(top, "slice [1,0] of [4,2]"),
            "plan.lp:4: weight 1 (slice [1,0] of [4,2]) overlaps weight 0 "
            "(slice [0,0] of [4,2]) of 'w'");
  EXPECT_EQ(error(top, top),
            "plan.lp:4: weight 1 (slice [0,0] of [4,2]) overlaps weight 0 "
            "(slice [0,0] of [4,2]) of 'w'");
  EXPECT_EQ(error(top, "slice [3,0] of [5,2]"),
            "plan.lp:4: weight 1 (slice [3,0] of [5,2]) and weight 0 (slice "
            "[0,0] of [4,2]) of 'w' are slices of f32[5,2] and f32[4,2]: the "
            "slices of one tensor share its dtype and shape");
  EXPECT_EQ(error("slice [0,0] of [5,2]", "slice [3,0] of [5,2]"),
            "plan.lp:3: the slices of 'w' (weights 0, 1) cover 8 of the 10 "
            "elements of its [5,2]: slices must tile their tensor exactly");
  // A block may reach past the end (padding), which is no part of the
  // tiling: only the parts inside count.
  EXPECT_EQ(error(top, "slice [3,0] of [4,2]"),
            "plan.lp:3: the slices of 'w' (weights 0, 1) cover 6 of the 8 "
            "elements of its [4,2]: slices must tile their tensor exactly");
  EXPECT_EQ(error(top, "slice [2,1] of [4,2]"),
            "plan.lp:3: the slices of 'w' (weights 0, 1) cover 6 of the 8 "
            "elements of its [4,2]: slices must tile their tensor exactly");
  EXPECT_EQ(error("slice [0,0] of [3,2]", "slice [2,0] of [3,2]"), "parsed");
  EXPECT_EQ(error("slice [0,0] of [1,2]", "slice [2,0] of [1,2]"), "parsed");
  EXPECT_EQ(error(top, "slice [2] of [4,2]"),
            "plan.lp:4: weight 1 is a slice [2] of [4,2], which does not have "
            "the rank of its shape [2,2]");
  EXPECT_EQ(error(top, "slice [2,0] of [4,2,1]"),
            "plan.lp:4: weight 1 is a slice [2,0] of [4,2,1], which does not "
            "have the rank of its shape [2,2]");
  // Mismatched dtype; a whole weight sharing the name; another kind.
  EXPECT_EQ(error(top, bottom,
                  "weight 2 \"v\" f64 [2,2] offset 128 bytes 32 slice [0,0] "
                  "of [2,4]\n"
                  "weight 3 \"v\" f32 [2,2] offset 192 bytes 16 slice [0,2] "
                  "of [2,4]\n",
                  4),
            "plan.lp:6: weight 3 (slice [0,2] of [2,4]) and weight 2 (slice "
            "[0,0] of [2,4]) of 'v' are slices of f32[2,4] and f64[2,4]: the "
            "slices of one tensor share its dtype and shape");
  EXPECT_EQ(error(top, bottom,
                  "weight 2 \"w\" f32 [2,2] offset 128 bytes 16 state\n", 3),
            "plan.lp:5: weights 0 and 2 are both named 'w', but only the "
            "slices of one tensor may share a name");
  EXPECT_EQ(error(top, "",
                  "weight 2 \"u\" f32 [2,2] offset 128 bytes 16\n"
                  "weight 3 \"u\" f32 [2,2] offset 192 bytes 16\n",
                  4),
            "plan.lp:4: weights 0 and 1 are both named 'w', but only the "
            "slices of one tensor may share a name");
  EXPECT_EQ(error("", ""),
            "plan.lp:4: weights 0 and 1 are both named 'w', but only the "
            "slices of one tensor may share a name");
  StatusOr<Plan> kinds =
      parsePlan(replaced(slicePlan(), "bytes 16 state slice [2,0]",
                         "bytes 16 slice [2,0]"),
                "plan.lp");
  ASSERT_FALSE(kinds.isOk());
  EXPECT_EQ(kinds.status().message(),
            "plan.lp:4: weight 1 (slice [2,0] of [4,2]) and weight 0 (slice "
            "[0,0] of [4,2]) of 'w' differ in kind (state or not): the slices "
            "of one tensor are all state or none");
  // A copy is a block of its source's tensor: another slice of it, or all
  // of it (ZeRO's whole bf16 copy of a sharded master), but not a block of
  // another shape.
  EXPECT_TRUE(parsePlan(slicePlan(top, bottom,
                                  "weight 2 \"w.bf16\" bf16 [2,2] offset 128 "
                                  "bytes 8 state cast_of 0 slice [2,0] of "
                                  "[4,2]\n"
                                  "weight 3 \"w.bf16\" bf16 [2,2] offset 192 "
                                  "bytes 8 state cast_of 1 slice [0,0] of "
                                  "[4,2]\n",
                                  4),
                        "swapped.lp")
                  .isOk());
  StatusOr<Plan> whole = parsePlan(
      slicePlan(top, bottom,
                "weight 2 \"w.bf16\" bf16 [4,2] offset 128 bytes 16 state "
                "cast_of 1\n",
                3),
      "whole.lp");
  ASSERT_TRUE(whole.isOk()) << whole.status().message();
  EXPECT_FALSE(copiesSourceBlock(*whole, whole->weights[2]));
  EXPECT_EQ(error(top, bottom,
                  "weight 2 \"w.bf16\" bf16 [2,2] offset 128 bytes 8 state "
                  "cast_of 0\n",
                  3),
            "plan.lp:5: weight 2 is a cast of weight 0 (slice [0,0] of "
            "[4,2]), but a copy must be a block of its source's tensor");
  // Syntax, and the version.
  EXPECT_EQ(error(top, "slice [-2,0] of [4,2]"),
            "plan.lp:4: negative offset -2 in slice '[-2,0]'");
  EXPECT_EQ(error(top, "slice [2,x] of [4,2]"),
            "plan.lp:4: expected a list like [1,2,3] in a slice's offsets, got "
            "'[2,x]'");
  EXPECT_EQ(error(top, "slice [2,0] of [4,-2]"),
            "plan.lp:4: negative dimension -2 in shape '[4,-2]'");
  EXPECT_EQ(error(top, "slice [2,0] in [4,2]"),
            "plan.lp:4: expected 'weight ID \"NAME\" DTYPE SHAPE offset INT "
            "bytes INT [state] [cast_of ID] [slice [OFFSET,...] of SHAPE]'");
  EXPECT_EQ(error(top, "slice [] of []"),
            "plan.lp:4: weight 1 is a slice of a scalar; only tensors have "
            "slices");
  StatusOr<Plan> old = parsePlan(slicePlan(top, bottom, "", 2, 3), "plan.lp");
  ASSERT_FALSE(old.isOk());
  EXPECT_EQ(old.status().message(), "plan.lp:3: 'slice' needs plan version 4");
}

TEST(PlanTest, SliceRunsCopyBlocks) {
  // A 3x4 tensor holding 0..11; the block of rows 1..2 and columns 1..2.
  std::vector<int64_t> global = {3, 4};
  std::vector<std::vector<int64_t>> runs;
  forEachSliceRun(global, {1, 1}, {2, 2},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{5, 0, 2}, {9, 2, 2}}));
  // Whole rows are one run, and so is a whole tensor.
  runs.clear();
  forEachSliceRun(global, {1, 0}, {2, 4},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{4, 0, 8}}));
  runs.clear();
  forEachSliceRun({2, 3, 4}, {0, 0, 0}, {2, 3, 4},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{0, 0, 24}}));
  // Nothing for an empty block.
  runs.clear();
  forEachSliceRun(global, {1, 1}, {0, 2},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_TRUE(runs.empty());

  // A block reaching past the end: only its part inside has runs; it is
  // read with zeros for the rest and written back without them.
  runs.clear();
  forEachSliceRun(global, {2, 2}, {2, 4},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{10, 0, 2}}));
  runs.clear();
  forEachSliceRun(global, {1, 0}, {4, 4},
                  [&](int64_t from, int64_t to, int64_t count) {
                    runs.push_back({from, to, count});
                  });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{4, 0, 8}}));
  {
    std::vector<int32_t> tensor(12);
    for (int i = 0; i < 12; ++i)
      tensor[i] = i + 1;
    std::vector<int32_t> padded(8, -1);
    extractSlice(reinterpret_cast<const uint8_t *>(tensor.data()),
                 reinterpret_cast<uint8_t *>(padded.data()), 4, global, {2, 2},
                 {2, 4});
    EXPECT_EQ(padded, (std::vector<int32_t>{11, 12, 0, 0, 0, 0, 0, 0}));
    std::vector<int32_t> back(12, -1);
    insertSlice(reinterpret_cast<uint8_t *>(back.data()),
                reinterpret_cast<const uint8_t *>(padded.data()), 4, global,
                {2, 2}, {2, 4});
    EXPECT_EQ(back, (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, 11, 12}));
  }

  // A 3-d tensor 2x3x4 (0..23): the block [1, 1..2, 2..3], out and back in.
  std::vector<int32_t> whole(24);
  for (int i = 0; i < 24; ++i)
    whole[i] = i;
  std::vector<int32_t> block(4);
  extractSlice(reinterpret_cast<const uint8_t *>(whole.data()),
               reinterpret_cast<uint8_t *>(block.data()), 4, {2, 3, 4},
               {1, 1, 2}, {1, 2, 2});
  EXPECT_EQ(block, (std::vector<int32_t>{18, 19, 22, 23}));
  std::vector<int32_t> rebuilt(24, -1);
  insertSlice(reinterpret_cast<uint8_t *>(rebuilt.data()),
              reinterpret_cast<const uint8_t *>(block.data()), 4, {2, 3, 4},
              {1, 1, 2}, {1, 2, 2});
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(rebuilt[i], (i == 18 || i == 19 || i == 22 || i == 23) ? i : -1)
        << i;
}

//===----------------------------------------------------------------------===//
// Groups and collectives (version 2)
//===----------------------------------------------------------------------===//

namespace {

/// Two ranks that all-reduce their input and exchange it.
std::string twoRankPlan(const std::string &groups = "groups 1\n"
                                                    "group 0 [0,1]\n") {
  std::string rank = "arena 128\n"
                     "input \"x\" a0:f32[4]\n"
                     "output \"y\" a64:f32[4]\n"
                     "collective all_reduce a0:f32[4] -> a64:f32[4] group=0 "
                     "op=sum\n";
  return "loom-plan 2\nweights 0\n" + groups + "rank 0 " + rank +
         "collective send a0:f32[4] -> peer=1 tag=3\nend\n" + "rank 1 " + rank +
         "collective recv -> a0:f32[4] peer=0 tag=3\nend\ndata 0\n";
}

} // namespace

TEST(PlanTest, GroupsAndCollectivesRoundTrip) {
  StatusOr<Plan> plan = parsePlan(twoRankPlan(), "ranks.lp");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0], (std::vector<int>{0, 1}));
  const Instruction &reduce = plan->ranks[0].instructions[0];
  EXPECT_EQ(reduce.kind, Instruction::Kind::Collective);
  EXPECT_EQ(reduce.kernel, "all_reduce");
  EXPECT_EQ(std::get<int64_t>(reduce.attrs.at("group")), 0);
  const Instruction &recv = plan->ranks[1].instructions[1];
  EXPECT_EQ(recv.kernel, "recv");
  EXPECT_TRUE(recv.inputs.empty());
  ASSERT_EQ(recv.outputs.size(), 1u);

  std::string written = writePlan(*plan);
  EXPECT_NE(written.find("groups 1\ngroup 0 [0,1]\nrank 0"), std::string::npos);
  EXPECT_NE(written.find("collective send a0:f32[4] -> peer=1 tag=3\n"),
            std::string::npos);
  StatusOr<Plan> again = parsePlan(written, "again.lp");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(writePlan(*again), written);
}

TEST(PlanErrorTest, Groups) {
  auto withGroups = [](const std::string &groups) {
    return parseError(twoRankPlan(groups));
  };
  EXPECT_EQ(withGroups("groups 1\ngroup 0 [1,0]\n"),
            "plan.lp:4: group 0 must list ranks in increasing order, once");
  EXPECT_EQ(withGroups("groups 1\ngroup 0 [0,0]\n"),
            "plan.lp:4: group 0 must list ranks in increasing order, once");
  EXPECT_EQ(withGroups("groups 1\ngroup 0 []\n"),
            "plan.lp:4: group 0 has no ranks");
  EXPECT_EQ(withGroups("groups 1\ngroup 1 [0,1]\n"),
            "plan.lp:4: group id 1 where 0 was expected (ids count up from 0)");
  EXPECT_EQ(withGroups("groups 2\ngroup 0 [0,1]\n"),
            "plan.lp:5: expected 2 group lines, got 'rank'");
  EXPECT_EQ(withGroups("groups 1\ngroup 0 [0,2]\n"),
            "plan.lp:4: group 0 names rank 2, but the plan has 2 ranks");
  EXPECT_EQ(withGroups("groups 1\ngroup 0 [0,-1]\n"),
            "plan.lp:4: group 0 has rank -1, out of range");
  // Version 1 plans have neither groups nor collectives.
  std::string old = twoRankPlan();
  old.replace(0, 11, "loom-plan 1");
  EXPECT_EQ(parseError(old), "plan.lp:3: 'groups' needs plan version 2");
  EXPECT_EQ(parseError(replaced(old, "groups 1\ngroup 0 [0,1]\n", "")),
            "plan.lp:6: 'collective' needs plan version 2");
  EXPECT_EQ(parseError(replaced(twoRankPlan(), "op=sum\n", "op=sum {\n")),
            "plan.lp:8: a collective has no '{' block");
}
