//===- Plan.h - The runtime plan: what the compiler hands the runtime -*- C++
//-*-===//
//
// A plan is everything one training or inference step needs: the weights, and
// per rank an instruction stream over one statically planned arena. The
// compiler (lib/Target/Plan) builds a Plan and writes it with
// writePlan; the runtime reads it with parsePlan. The file format is
// documented in docs/design/plan-format.md. Plain C++17: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_H
#define LOOM_RUNTIME_PLAN_H

#include "loom/Runtime/Status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loomrt {

/// The format version written by writePlan; parsePlan accepts 1 to 4.
/// Version 2 added process groups and `collective` instructions, version 3
/// the batch rows of an input (`rows=OFFSET`), version 4 weights that are
/// slices of a larger tensor (`slice [...] of [...]`).
constexpr int kPlanVersion = 4;

/// Element types. `i1` is stored as one byte holding 0 or 1.
enum class DType : uint8_t { F16, BF16, F32, F64, I1, I32, I64 };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The plan/MLIR spelling: "f32", "i64", "i1", ...
const char *dtypeName(DType dtype);
/// Parses a dtypeName spelling; false when `name` is none.
bool parseDType(std::string_view name, DType &dtype);

/// Product of `shape` (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);
/// "[8,128,768]".
std::string shapeString(const std::vector<int64_t> &shape);

/// Where a tensor lives: in the rank's arena at a byte offset, or in a weight
/// (the whole weight, possibly viewed with another shape of the same size).
struct TensorRef {
  enum class Space : uint8_t { Arena, Weight };
  Space space = Space::Arena;
  /// Byte offset into the arena, or the weight's id.
  uint64_t offset = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t elements() const { return numElements(shape); }
  uint64_t bytes() const { return uint64_t(elements()) * dtypeSize(dtype); }
};

/// Kernel and program-op attributes: integers, floats, integer lists and bare
/// words (enum values such as `tanh` or `mean`).
using AttrValue =
    std::variant<int64_t, double, std::vector<int64_t>, std::string>;
using Attributes = std::map<std::string, AttrValue>;

/// The integer attribute `name`, or `fallback` when it is absent or not an
/// integer.
int64_t intAttrOr(const Attributes &attrs, const std::string &name,
                  int64_t fallback);

/// One operation of an `elementwise` kernel's program. Values are numbered:
/// 0..n-1 are the kernel's inputs (each broadcast, numpy-style, to the
/// kernel's iteration shape, which is its outputs' shape), then one value per
/// program op in order.
struct ProgramOp {
  /// add sub mul div pow fmod max min neg sqrt rsqrt exp log erf tanh sigmoid
  /// relu reciprocal abs sin cos gelu cast compare select const.
  std::string op;
  /// Element type of the result.
  DType dtype = DType::F32;
  /// Value numbers of the operands.
  std::vector<int> operands;
  /// gelu: approximate=none|tanh; compare: direction=eq|ne|lt|le|gt|ge;
  /// const: value=<double> (a scalar splat).
  Attributes attrs;
};

/// One step of a rank's stream: a kernel, or a communication operation
/// (a collective over a group, or a point-to-point send/recv).
struct Instruction {
  enum class Kind : uint8_t { Kernel, Collective };
  Kind kind = Kind::Kernel;
  /// Kernels: the kernel, e.g. "matmul", "elementwise", "softmax".
  /// Collectives: all_reduce, all_gather, reduce_scatter, broadcast,
  /// all_to_all, send or recv. docs/design/plan-format.md lists them all
  /// with their attributes.
  std::string kernel;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  Attributes attrs;
  /// `elementwise` only: the program, and for each output the value it
  /// stores.
  std::vector<ProgramOp> program;
  std::vector<int> yields;
  /// Where the instruction came from (the ONNX node name), for reports.
  std::string loc;
  /// In a pipeline, the schedule action it belongs to (`F1.3`: the forward
  /// of stage 1 for microbatch 3; B backward, W weight gradients), for
  /// traces and the measured bubble; empty otherwise.
  std::string action;
  /// Line in the plan file, for diagnostics (0 when built in memory).
  int line = 0;
};

/// A graph input or output of a rank and the arena slot (or weight) holding
/// it.
struct Binding {
  std::string name;
  TensorRef ref;
  /// Inputs of a training step: the first row of the step's global batch
  /// that this input holds (it holds rows [batchOffset, batchOffset +
  /// ref.shape[0])), so that ranks splitting a batch each read their own
  /// rows. -1: not set; the input then holds the whole batch.
  int64_t batchOffset = -1;
};

/// What one rank runs.
struct RankProgram {
  int rank = 0;
  /// Bytes of the rank's arena: the planned peak of its activations, inputs
  /// and outputs.
  uint64_t arenaBytes = 0;
  /// Bytes of the gradients the rank holds once the backward pass has
  /// produced them (`gradients` on the rank line; their shards under ZeRO
  /// stages 2 and 3), for reports; -1 when the plan does not say, and then
  /// they are as large as the trained parameters the rank holds.
  int64_t gradientBytes = -1;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<Instruction> instructions;
};

/// A weight: a named tensor stored in the plan's data section.
struct Weight {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Byte offset of the weight's data in Plan::data (64-byte aligned).
  uint64_t offset = 0;
  uint64_t bytes = 0;
  /// State persists across steps and is written by the step itself: a
  /// trained parameter or optimizer state. Only state weights may be kernel
  /// outputs; the others are read-only.
  bool state = false;
  /// The id of the weight this one is a bf16 copy of (`cast_of`), or -1.
  /// The runtime derives a copy from its source when it loads the plan and
  /// whenever the source is set (Executor::setWeight), so a copy never
  /// disagrees with its source, whatever wrote the source's bytes. A copy
  /// is usually the same block as its source; it may be another block of
  /// the same tensor (ZeRO's whole bf16 copy of a sharded f32 master), and
  /// is then derived from every weight of the source's name that it
  /// overlaps (copiesSourceBlock).
  int64_t castOf = -1;
  /// A slice (version 4): this weight is the block of a tensor of shape
  /// `globalShape` that starts at `sliceOffsets` and has the shape `shape`,
  /// e.g. one rank's shard of a tensor-parallel parameter. Weights that are
  /// slices of one tensor share its name and together tile it exactly.
  /// Both empty for a whole tensor.
  std::vector<int64_t> sliceOffsets;
  std::vector<int64_t> globalShape;

  bool isSlice() const { return !globalShape.empty(); }
};

struct Plan {
  int version = kPlanVersion;
  /// Indexed by weight id.
  std::vector<Weight> weights;
  /// Process groups, indexed by group id: sorted world ranks. A collective
  /// names the group it runs over (`group=ID`).
  std::vector<std::vector<int>> groups;
  /// The data section: every weight's bytes, each at a 64-byte aligned offset.
  std::vector<uint8_t> data;
  std::vector<RankProgram> ranks;
};

/// Whether weight `copy` is a `cast_of` copy of exactly its source's block
/// (the same slice, or both whole), so that setting the source sets it.
bool copiesSourceBlock(const Plan &plan, const Weight &copy);

/// Copies the elements that the block of `from` (at `fromOffsets`, of shape
/// `fromShape`, row-major) and the block of `to` share, `size` bytes each;
/// empty offsets are a block at the origin.
void copyBlockOverlap(const uint8_t *from,
                      const std::vector<int64_t> &fromOffsets,
                      const std::vector<int64_t> &fromShape, uint8_t *to,
                      const std::vector<int64_t> &toOffsets,
                      const std::vector<int64_t> &toShape, size_t size);

/// The block of weight `copy`'s source tensor that `copy` covers, in the
/// source's dtype, assembled from the plan's initial bytes of every weight
/// of the source's name (a copy of another block than its source's).
std::vector<uint8_t> sourceBlockOf(const Plan &plan, const Weight &copy);

/// Serializes `plan` (docs/design/plan-format.md).
std::string writePlan(const Plan &plan);

/// Parses a serialized plan. Every error names `sourceName` and the line.
/// Structural checks are done here (references inside the arena and the data
/// section, weight ids that exist, sizes that agree); whether a kernel exists
/// and accepts its operands is checked by the backend that runs it.
StatusOr<Plan> parsePlan(std::string_view bytes, const std::string &sourceName);

/// The names of every `collective` instruction, sorted: all_gather,
/// all_reduce, all_to_all, broadcast, recv, reduce_scatter, send.
std::vector<std::string> collectiveNames();

/// The bytes a collective instruction sends, as a ring sends them
/// (loomcost::ringBytesSent: S is a reduce_scatter's or send's input, the
/// others' output), in a group of `groupSize` ranks (2 for a transfer); 0
/// for an instruction that is not a collective. What the executor counts
/// as it runs (RunReport::commBytesSent) and a report counts from a plan.
uint64_t collectiveBytesSent(const Instruction &instruction, int64_t groupSize);

/// The size S of a collective instruction's whole tensor: a
/// reduce_scatter's or send's input, the others' output (0 without one, or
/// for an instruction that is not a collective).
uint64_t collectiveFullBytes(const Instruction &instruction);

/// Checks that the ranks' communication agrees, over the whole plan: every
/// collective is well-formed, every member of a group issues the same
/// collectives on it in the same order (kind, element count, dtype,
/// reduction, root), and every send has a receive of the same size and
/// dtype from the same peer with the same tag. The compiler runs it on every
/// plan it writes, so that what the engines would otherwise find at run time
/// (or wait on until the timeout) is an error before anything runs.
Status checkCommunication(const Plan &plan);

/// Checks that between every two ranks the sender's sends and the
/// receiver's receives come in the same order (by tag): what an engine
/// that pairs transfers by posting order, not tag, needs (NCCL's). The
/// launcher checks it before NCCL ranks start.
Status checkTransferOrder(const Plan &plan);

/// Checks the weights' slices (version 4): each slice lies inside its
/// tensor, with offsets and a global shape of its own shape's rank; weights
/// that share a name are slices of one tensor (the same dtype and global
/// shape, all state or none) that tile it exactly, without overlap or gap;
/// a name without `slice` is unique; and a `cast_of` copy of a slice is the
/// same slice. parsePlan and the compiler apply it. On an error, `culprit`
/// (when given) receives the id of the weight the message is about.
Status checkWeightSlices(const Plan &plan, size_t *culprit = nullptr);

/// For every weight id, the ranks that hold it, in increasing order: the
/// ranks whose program refers to it (an instruction operand, an input or
/// an output) or to a `cast_of` copy of it (a copy is derived from its
/// source); a state weight that no rank refers to is rank 0's, so that its
/// value is kept and checkpointed somewhere. An executor allocates and
/// copies the weights its rank holds, and only those (Executor::holds).
std::vector<std::vector<int>> weightHolders(const Plan &plan);

/// For every weight id, whether rank `rank` holds it (as weightHolders);
/// only rank 0 looks at the other ranks' programs.
std::vector<bool> rankHeldWeights(const Plan &plan, int rank);

/// "slice [0,4] of [8,8]" for a slice, "" for a whole weight.
std::string sliceString(const std::vector<int64_t> &offsets,
                        const std::vector<int64_t> &globalShape);

/// Calls `run(globalElement, sliceElement, count)` for each contiguous run
/// of the block of a row-major tensor of shape `globalShape` that starts at
/// `offsets` and has shape `shape`: `count` elements at element
/// `globalElement` of the whole tensor are elements `sliceElement...` of
/// the block, itself dense and row-major. The runs come in increasing
/// order; trailing dimensions the block spans whole make them long (a
/// block of rows is one run). Nothing for an empty block. A block may reach
/// past the tensor's end (a padded vocabulary's last rows): only its part
/// inside the tensor has runs.
void forEachSliceRun(
    const std::vector<int64_t> &globalShape,
    const std::vector<int64_t> &offsets, const std::vector<int64_t> &shape,
    const std::function<void(int64_t globalElement, int64_t sliceElement,
                             int64_t count)> &run);

/// The alignment of each weight an executor copies into memory of its own
/// (state weights, bf16 copies): what a rank's weights take is their bytes
/// rounded up to it, which the report's planned peak counts too.
constexpr uint64_t kOwnedWeightAlignment = 256;

/// Whether the block reaches past the end of the tensor (padding).
bool sliceOverhangs(const std::vector<int64_t> &globalShape,
                    const std::vector<int64_t> &offsets,
                    const std::vector<int64_t> &shape);

/// Copies a block (as forEachSliceRun) of elements of `elementBytes` bytes
/// out of the whole tensor `whole` into the dense `slice` (its padding past
/// the tensor's end zeros), or back in (the padding dropped).
void extractSlice(const uint8_t *whole, uint8_t *slice, size_t elementBytes,
                  const std::vector<int64_t> &globalShape,
                  const std::vector<int64_t> &offsets,
                  const std::vector<int64_t> &shape);
void insertSlice(uint8_t *whole, const uint8_t *slice, size_t elementBytes,
                 const std::vector<int64_t> &globalShape,
                 const std::vector<int64_t> &offsets,
                 const std::vector<int64_t> &shape);

/// Reads and parses the plan file at `path`.
StatusOr<Plan> loadPlan(const std::string &path);

/// True when `bytes` starts like a plan file.
bool looksLikePlan(std::string_view bytes);

} // namespace loomrt

#endif // LOOM_RUNTIME_PLAN_H
