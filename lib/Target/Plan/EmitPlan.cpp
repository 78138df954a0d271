//===- EmitPlan.cpp - A lowered function as a runtime plan ----------------===//
//
// Almost one instruction per plan op: buffers become arena or weight
// references, plan.kernel becomes a kernel instruction, and the body of an
// elementwise kernel becomes its numbered program.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Plan/EmitPlan.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Runtime/TensorIO.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>

using namespace mlir;
using namespace mlir::loom;
namespace rt = loomrt;

namespace {

std::optional<rt::DType> toDType(Type type) {
  if (type.isF16())
    return rt::DType::F16;
  if (type.isBF16())
    return rt::DType::BF16;
  if (type.isF32())
    return rt::DType::F32;
  if (type.isF64())
    return rt::DType::F64;
  if (type.isInteger(1))
    return rt::DType::I1;
  if (type.isInteger(32))
    return rt::DType::I32;
  if (type.isInteger(64))
    return rt::DType::I64;
  return std::nullopt;
}

/// A name for reports: the ONNX node name when there is one.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations()) {
      std::string name = locationName(inner);
      if (!name.empty())
        return name;
    }
    return "";
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  return "";
}

/// The pipeline action an op belongs to: loom-split-stages fuses its
/// location with the action's name (`F1.3`) as metadata.
std::string actionName(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return "";
  if (auto name = dyn_cast_or_null<StringAttr>(fused.getMetadata())) {
    StringRef text = name.getValue();
    if (!text.empty() && StringRef("FBW").contains(text.front()) &&
        text.drop_front().contains('.'))
      return text.str();
  }
  for (Location inner : fused.getLocations())
    if (std::string action = actionName(inner); !action.empty())
      return action;
  return "";
}

/// Kernels that become `collective` instructions (the runtime's list).
bool isCollective(StringRef kernel) {
  static const std::vector<std::string> names = rt::collectiveNames();
  return llvm::is_contained(names, kernel.str());
}

/// Orders weights by parameter (by identity) and slice offsets.
struct WeightKeyLess {
  bool operator()(const std::pair<Attribute, std::vector<int64_t>> &a,
                  const std::pair<Attribute, std::vector<int64_t>> &b) const {
    if (a.first != b.first)
      return a.first.getAsOpaquePointer() < b.first.getAsOpaquePointer();
    return a.second < b.second;
  }
};

class PlanBuilder {
public:
  /// `withValues` false: the weights get no bytes (plan.data stays empty):
  /// a plan of shapes only, which reports what each rank holds but cannot
  /// run.
  explicit PlanBuilder(bool withValues, bool someRanksOnly = false)
      : withValues(withValues), someRanksOnly(someRanksOnly) {}

  /// Appends world rank `rankNumber` without a program.
  void addEmptyRank(int rankNumber) {
    plan.ranks.emplace_back().rank = rankNumber;
  }

  /// Appends the program of world rank `rankNumber`, which runs `func`.
  LogicalResult addRank(func::FuncOp func, int rankNumber) {
    auto arena =
        func->getAttrOfType<IntegerAttr>(plan::PlanDialect::kArenaSizeAttrName);
    if (!arena)
      return func.emitOpError("has no planned arena; run -loom-plan-memory "
                              "(or the -loom-lower-to-plan pipeline) first");
    rt::RankProgram &rank = plan.ranks.emplace_back();
    rank.rank = rankNumber;
    // A function on some ranks (a pipeline stage's) spans its mesh with
    // them, in their order.
    SmallVector<int64_t> ranks = LoomDialect::getRanksOf(func);
    meshPosition = int(llvm::find(ranks, rankNumber) - ranks.begin());
    rank.arenaBytes = arena.getInt();
    if (auto gradients = func->getAttrOfType<IntegerAttr>(
            LoomDialect::kGradientBytesAttrName))
      rank.gradientBytes = gradients.getInt();
    for (Operation &op : func.getBody().front()) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(&op)
              .Case([&](plan::InputOp input) -> LogicalResult {
                FailureOr<rt::TensorRef> ref = reference(input.getBuffer());
                if (failed(ref))
                  return failure();
                rt::Binding &binding = rank.inputs.emplace_back();
                binding.name = input.getName().str();
                binding.ref = *ref;
                return batchRows(func, input, rankNumber, binding);
              })
              .Case([&](plan::OutputOp output) -> LogicalResult {
                FailureOr<rt::TensorRef> ref = reference(output.getBuffer());
                if (failed(ref))
                  return failure();
                rank.outputs.push_back({output.getName().str(), *ref});
                return success();
              })
              .Case([&](plan::KernelOp kernel) {
                return addKernel(kernel, rank);
              })
              .Case<plan::AllocOp, plan::WeightOp, plan::ViewOp,
                    func::ReturnOp>([](Operation *) { return success(); })
              .Default([](Operation *op) {
                return op->emitOpError(
                    "cannot be part of a runtime plan; lower the function "
                    "with -loom-lower-to-plan first");
              });
      if (failed(result))
        return failure();
    }
    return success();
  }

  /// The first row of the step's global batch that `input` holds on rank
  /// `rankNumber` (its `rows`, one per rank of `func`), when it has them.
  static LogicalResult batchRows(func::FuncOp func, plan::InputOp input,
                                 int rankNumber, rt::Binding &binding) {
    std::optional<ArrayRef<int64_t>> rows = input.getRows();
    if (!rows)
      return success();
    SmallVector<int64_t> ranks = LoomDialect::getRanksOf(func);
    auto position = llvm::find(ranks, rankNumber);
    if (rows->size() != ranks.size() || position == ranks.end())
      return input.emitOpError()
             << "has " << rows->size() << " batch row offset(s) but @"
             << func.getSymName() << " runs on " << ranks.size() << " rank(s)";
    binding.batchOffset = (*rows)[position - ranks.begin()];
    return success();
  }

  FailureOr<rt::Plan> take(ModuleOp module) {
    // A copy whose source the plan also holds names it (the same slice of
    // it, or a block of the same tensor), so that the runtime keeps the two
    // in step; without it (inference reads only the copy) the copy is
    // simply the weight.
    for (CopySource &copy : copySources) {
      const rt::Weight &weight = plan.weights[copy.id];
      auto it = weightIds.find({copy.source, weight.sliceOffsets});
      if (it != weightIds.end() &&
          plan.weights[it->second].shape == weight.shape) {
        plan.weights[copy.id].castOf = int64_t(it->second);
        continue;
      }
      // Another block of the same tensor (ZeRO's whole bf16 copy of a
      // sharded master): the runtime assembles it from the source's blocks.
      auto tensorShape = [](const rt::Weight &w) {
        return w.isSlice() ? w.globalShape : w.shape;
      };
      bool found = false;
      for (const auto &[key, id] : weightIds)
        if (key.first == copy.source &&
            tensorShape(plan.weights[id]) == tensorShape(weight)) {
          plan.weights[copy.id].castOf = int64_t(id);
          found = true;
          break;
        }
      if (found)
        continue;
      for (const auto &[key, id] : weightIds)
        if (key.first == copy.source)
          return copy.parameter.emitOpError("is a copy of @")
                 << cast<StringAttr>(copy.source).getValue() << " read as "
                 << (weight.isSlice() ? rt::shapeString(weight.shape) + " at " +
                                            rt::shapeString(weight.sliceOffsets)
                                      : std::string("a whole tensor"))
                 << ", but its source's weights are blocks of a tensor of "
                    "another shape: a copy must be a block of its source's "
                    "tensor";
    }
    // The compiler's slices tile their parameters (or it has a bug). A plan
    // of some ranks only holds some slices.
    if (rt::Status status = rt::checkWeightSlices(plan);
        !someRanksOnly && !status)
      return module.emitError("the weights' slices are wrong: ")
             << status.message();
    return std::move(plan);
  }

private:
  FailureOr<rt::TensorRef> reference(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    rt::TensorRef ref;
    std::optional<rt::DType> dtype = toDType(type.getElementType());
    if (!dtype)
      return emitError(buffer.getLoc())
             << "element type " << type.getElementType()
             << " has no runtime equivalent";
    ref.dtype = *dtype;
    ref.shape.assign(type.getShape().begin(), type.getShape().end());
    Operation *root = plan::ViewOp::getRoot(buffer).getDefiningOp();
    if (auto weight = dyn_cast_or_null<plan::WeightOp>(root)) {
      FailureOr<uint64_t> id = weightId(weight);
      if (failed(id))
        return failure();
      ref.space = rt::TensorRef::Space::Weight;
      ref.offset = *id;
      return ref;
    }
    IntegerAttr offset;
    if (auto input = dyn_cast_or_null<plan::InputOp>(root))
      offset = input.getOffsetAttr();
    else if (auto alloc = dyn_cast_or_null<plan::AllocOp>(root))
      offset = alloc.getOffsetAttr();
    else
      return emitError(buffer.getLoc())
             << "buffer is not a plan.input, plan.alloc or plan.weight";
    if (!offset)
      return root->emitOpError("has no arena offset; run -loom-plan-memory");
    ref.space = rt::TensorRef::Space::Arena;
    ref.offset = offset.getInt();
    return ref;
  }

  /// The part of a parameter that a weight holds: the whole tensor
  /// (`offsets` empty), or the block at `offsets` of shape `shape`.
  struct Part {
    std::vector<int64_t> offsets, shape;
  };

  /// What `weight` reads of `parameter` on mesh device `rank` (its
  /// function's `rank`-th rank; the world rank when the function runs on
  /// all of them): the whole
  /// parameter when it has its type, or, when the parameter has a sharding
  /// and `weight` its shard type (a partitioned function), the rank's block
  /// of it. Mesh coordinates are the rank's row-major position in the mesh;
  /// a dimension split over axes {a, b} is cut into size(a) * size(b)
  /// blocks, of which the rank holds block coord(a) * size(b) + coord(b).
  /// Ranks that differ only along the other axes hold the same block.
  FailureOr<Part> partOf(plan::WeightOp weight, ParameterOp parameter,
                         int rank) {
    RankedTensorType global = parameter.getTensorType();
    ArrayRef<int64_t> local = weight.getBuffer().getType().getShape();
    Part part;
    part.shape.assign(global.getShape().begin(), global.getShape().end());
    if (local == global.getShape())
      return part;
    std::optional<ShardingAttr> sharding = parameter.getSharding();
    auto mesh = sharding ? symbols.lookupNearestSymbolFrom<MeshOp>(
                               parameter, sharding->getMesh())
                         : MeshOp();
    if (!mesh)
      return weight.emitOpError("reads @")
             << parameter.getSymName() << " of type " << global << " as "
             << weight.getBuffer().getType()
             << ", but the parameter has no sharding that makes it a shard";
    if (sharding->getPartialKind() != PartialKind::none)
      return parameter.emitOpError(
          "has a partial sharding; a plan holds no pending sum of a weight");
    MeshAttr axes = mesh.getMesh();
    if (rank >= axes.getNumDevices())
      return weight.emitOpError("runs on rank ")
             << rank << ", which is not a device of mesh "
             << sharding->getMesh() << " (" << axes.getNumDevices()
             << " devices)";
    SmallVector<int64_t> coords(axes.getAxisSizes().size());
    for (int64_t rest = rank, i = int64_t(coords.size()) - 1; i >= 0; --i) {
      coords[i] = rest % axes.getAxisSizes()[i];
      rest /= axes.getAxisSizes()[i];
    }
    part.offsets.assign(part.shape.size(), 0);
    for (unsigned dim = 0; dim < sharding->getRank(); ++dim) {
      int64_t blocks = 1, block = 0;
      for (StringRef axis : sharding->getDimAxes(dim)) {
        unsigned index = *axes.getAxisIndex(axis);
        block = block * axes.getAxisSizes()[index] + coords[index];
        blocks *= axes.getAxisSizes()[index];
      }
      part.shape[dim] /= blocks;
      part.offsets[dim] = block * part.shape[dim];
    }
    if (ArrayRef<int64_t>(part.shape) != local)
      return weight.emitOpError("reads @")
             << parameter.getSymName() << " as " << weight.getBuffer().getType()
             << ", but rank " << rank << "'s shard of its " << global << " is "
             << rt::shapeString(part.shape);
    return part;
  }

  /// The id of the weight read by `weight` on the rank being added, adding
  /// it on first use: one per parameter, or per distinct slice of one.
  FailureOr<uint64_t> weightId(plan::WeightOp weight) {
    auto parameter = symbols.lookupNearestSymbolFrom<ParameterOp>(
        weight, weight.getNameAttr());
    if (!parameter)
      return weight.emitOpError("refers to no loom.parameter");
    FailureOr<Part> part = partOf(weight, parameter, meshPosition);
    if (failed(part))
      return failure();
    // A piece of another parameter is named after it, at its place in it.
    Home home = homeOf(parameter);
    if (!home.base.empty()) {
      std::vector<int64_t> offsets = home.base;
      for (auto [dim, offset] : llvm::enumerate(part->offsets))
        offsets[dim] += offset;
      part->offsets = std::move(offsets);
    }
    Attribute name = StringAttr::get(parameter.getContext(), home.name);
    auto it = weightIds.find({name, part->offsets});
    if (it != weightIds.end())
      return it->second;
    rt::Weight info;
    info.name = home.name;
    RankedTensorType type = home.global;
    info.dtype = *toDType(type.getElementType());
    info.shape = part->shape;
    if (!part->offsets.empty()) {
      info.sliceOffsets = part->offsets;
      info.globalShape.assign(type.getShape().begin(), type.getShape().end());
    }
    info.bytes =
        uint64_t(rt::numElements(info.shape)) * rt::dtypeSize(info.dtype);
    // Without values (a shapes-only plan, for sizing), no data section.
    info.offset = withValues ? llvm::alignTo(plan.data.size(), 64) : 0;
    if (withValues)
      plan.data.resize(info.offset + info.bytes);
    // The value is read relative to the parameter itself (a piece shifts
    // the part into its source).
    Part own = *part;
    if (!home.base.empty())
      for (auto [dim, offset] : llvm::enumerate(home.base))
        own.offsets[dim] -= offset;
    if (own.offsets == std::vector<int64_t>(own.offsets.size(), 0) &&
        own.shape ==
            std::vector<int64_t>(parameter.getTensorType().getShape().begin(),
                                 parameter.getTensorType().getShape().end()))
      own.offsets.clear();
    if (withValues &&
        failed(copyValue(parameter, own, plan.data.data() + info.offset)))
      return failure();
    uint64_t id = plan.weights.size();
    plan.weights.push_back(std::move(info));
    weightIds[{name, part->offsets}] = id;
    if (auto castOf = dyn_cast_if_present<CastOfAttr>(
            parameter.getInitialValue().value_or(nullptr))) {
      auto source = symbols.lookupNearestSymbolFrom<ParameterOp>(
          parameter, castOf.getSource());
      Attribute sourceName =
          source ? Attribute(StringAttr::get(parameter.getContext(),
                                             homeOf(source).name))
                 : Attribute(castOf.getSource().getAttr());
      copySources.push_back({id, sourceName, parameter});
    }
    return id;
  }

  /// Where a parameter's weights go in the plan: under its own name, or,
  /// for a piece (`#loom.slice_of`) and a bf16 copy of one, under its
  /// source's name (the copy's with the copy's suffix), at the piece's
  /// offsets in the source's type.
  struct Home {
    std::string name;
    RankedTensorType global;
    std::vector<int64_t> base; // empty: the parameter is its own home
  };

  Home homeOf(ParameterOp parameter) {
    Home home{parameter.getSymName().str(), parameter.getTensorType(), {}};
    Attribute value = parameter.getInitialValue().value_or(nullptr);
    if (auto sliceOf = dyn_cast_if_present<SliceOfAttr>(value)) {
      auto source = symbols.lookupNearestSymbolFrom<ParameterOp>(
          parameter, sliceOf.getSource());
      if (!source)
        return home;
      return {source.getSymName().str(), source.getTensorType(),
              std::vector<int64_t>(sliceOf.getOffsets().begin(),
                                   sliceOf.getOffsets().end())};
    }
    if (Home state = stateHomeOf(parameter); !state.base.empty())
      return state;
    if (auto castOf = dyn_cast_if_present<CastOfAttr>(value)) {
      auto source = symbols.lookupNearestSymbolFrom<ParameterOp>(
          parameter, castOf.getSource());
      if (!source || !isa_and_present<SliceOfAttr>(
                         source.getInitialValue().value_or(nullptr)))
        return home;
      Home piece = homeOf(source);
      StringRef suffix = parameter.getSymName();
      suffix.consume_front(source.getSymName());
      return {piece.name + suffix.str(),
              RankedTensorType::get(piece.global.getShape(),
                                    parameter.getTensorType().getElementType()),
              piece.base};
    }
    return home;
  }

  /// The home of the optimizer state `optimizer.PIECE.STATE` of a piece
  /// (`#loom.slice_of`) PIECE with the piece's shape: the same place in
  /// `optimizer.SOURCE.STATE`, so that the state of a fused or padded
  /// parameter has the same names and shapes whichever layout split it
  /// (and a checkpoint resumes under another). No base otherwise.
  Home stateHomeOf(ParameterOp state) {
    Home none{state.getSymName().str(), state.getTensorType(), {}};
    StringRef rest = state.getSymName();
    if (!rest.consume_front("optimizer."))
      return none;
    // The longest prefix of REST that names a parameter, then '.'.
    for (size_t dot = rest.rfind('.'); dot != StringRef::npos && dot > 0;
         dot = rest.rfind('.', dot - 1)) {
      auto owner = symbols.lookupNearestSymbolFrom<ParameterOp>(
          state, StringAttr::get(state.getContext(), rest.take_front(dot)));
      if (!owner)
        continue;
      if (owner.getTensorType().getShape() != state.getTensorType().getShape())
        return none;
      Home piece = homeOf(owner);
      if (piece.base.empty())
        return none;
      return {"optimizer." + piece.name + rest.drop_front(dot).str(),
              RankedTensorType::get(piece.global.getShape(),
                                    state.getTensorType().getElementType()),
              piece.base};
    }
    return none;
  }

  /// Writes `part` of `parameter`'s initial value to `out` (dense,
  /// row-major): every element of a whole parameter, or the block's.
  LogicalResult copyValue(ParameterOp parameter, const Part &part,
                          uint8_t *out) {
    std::optional<Attribute> value = parameter.getInitialValue();
    if (!value)
      return parameter.emitOpError(
          "has no value; a plan needs every weight (the module was "
          "imported shapes-only)");
    if (auto castOf = dyn_cast<CastOfAttr>(*value))
      return copyCastValue(parameter, castOf, part, out);
    if (auto sliceOf = dyn_cast<SliceOfAttr>(*value)) {
      // The same part of the source, shifted to the piece's place in it.
      auto source = symbols.lookupNearestSymbolFrom<ParameterOp>(
          parameter, sliceOf.getSource());
      if (!source)
        return parameter.emitOpError("is a slice of ")
               << sliceOf.getSource() << ", which is not a loom.parameter";
      Part shifted;
      shifted.offsets.assign(sliceOf.getOffsets().begin(),
                             sliceOf.getOffsets().end());
      if (part.offsets.empty()) {
        auto shape = parameter.getTensorType().getShape();
        shifted.shape.assign(shape.begin(), shape.end());
      } else {
        shifted.shape = part.shape;
        for (auto [dim, offset] : llvm::enumerate(part.offsets))
          shifted.offsets[dim] += offset;
      }
      return copyValue(source, shifted, out);
    }
    RankedTensorType type = parameter.getTensorType();
    std::vector<int64_t> global(type.getShape().begin(), type.getShape().end());
    size_t width = rt::dtypeSize(*toDType(type.getElementType()));
    uint64_t wholeBytes = uint64_t(type.getNumElements()) * width;
    // Copies the part out of `data`, which holds elements [first, ...) of
    // the whole tensor.
    auto copyPart = [&](const uint8_t *data, int64_t first = 0) {
      if (part.offsets.empty()) {
        std::memcpy(out, data, wholeBytes);
        return;
      }
      rt::forEachSliceRun(global, part.offsets, part.shape,
                          [&](int64_t from, int64_t to, int64_t count) {
                            std::memcpy(out + size_t(to) * width,
                                        data + size_t(from - first) * width,
                                        size_t(count) * width);
                          });
    };
    if (auto external = dyn_cast<ExternalDataAttr>(*value)) {
      // Only the bytes from the part's first element to its last.
      int64_t first = 0, end = type.getNumElements();
      if (!part.offsets.empty()) {
        first = end;
        end = 0;
        rt::forEachSliceRun(global, part.offsets, part.shape,
                            [&](int64_t from, int64_t, int64_t count) {
                              first = std::min(first, from);
                              end = std::max(end, from + count);
                            });
        if (end <= first)
          return success();
      }
      if (uint64_t(external.getLength()) != wholeBytes)
        return parameter.emitOpError("external data '")
               << external.getPath() << "' is shorter than the parameter";
      uint64_t length = uint64_t(end - first) * width;
      auto file = llvm::MemoryBuffer::getFileSlice(external.getPath(), length,
                                                   external.getOffset() +
                                                       uint64_t(first) * width,
                                                   /*IsVolatile=*/false);
      if (!file)
        return parameter.emitOpError("cannot read external data '")
               << external.getPath() << "': " << file.getError().message();
      if (uint64_t((*file)->getBufferSize()) != length)
        return parameter.emitOpError("external data '")
               << external.getPath() << "' is shorter than the parameter";
      copyPart(reinterpret_cast<const uint8_t *>((*file)->getBufferStart()),
               first);
      return success();
    }
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(*value)) {
      AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob || blob->getData().size() != wholeBytes)
        return parameter.emitOpError("resource blob is missing or has the "
                                     "wrong size");
      copyPart(reinterpret_cast<const uint8_t *>(blob->getData().data()));
      return success();
    }
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense)
      return parameter.emitOpError("has a value of an unsupported kind");
    uint64_t partBytes = uint64_t(rt::numElements(part.shape)) * width;
    if (dense.getElementType().isInteger(1)) {
      std::vector<uint8_t> bytes;
      bytes.reserve(wholeBytes);
      for (bool element : dense.getValues<bool>())
        bytes.push_back(element);
      copyPart(bytes.data());
      return success();
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      // Every part of a splat is the splat.
      for (uint64_t at = 0; at < partBytes; at += raw.size())
        std::memcpy(out + at, raw.data(), raw.size());
      return success();
    }
    copyPart(reinterpret_cast<const uint8_t *>(raw.data()));
    return success();
  }

  /// A narrowed copy of another parameter: its source's value (the same
  /// part of it) converted by the runtime's own rounding, so the copy holds
  /// what a cast kernel computes from the source.
  LogicalResult copyCastValue(ParameterOp parameter, CastOfAttr castOf,
                              const Part &part, uint8_t *out) {
    auto source = symbols.lookupNearestSymbolFrom<ParameterOp>(
        parameter, castOf.getSource());
    // (The verifier checks the source; a module that skipped it must still
    // not recurse here.)
    if (!source ||
        isa_and_present<CastOfAttr>(source.getInitialValue().value_or(nullptr)))
      return parameter.emitOpError("is a cast of ")
             << castOf.getSource() << ", which is not an f32 or f64 "
             << "loom.parameter with a value";
    RankedTensorType type = source.getTensorType();
    if (type.getShape() != parameter.getTensorType().getShape())
      return parameter.emitOpError("is a cast of ")
             << castOf.getSource() << ", which has another shape";
    rt::HostTensor wide;
    wide.dtype = *toDType(type.getElementType());
    wide.shape = part.shape;
    wide.data.resize(uint64_t(rt::numElements(part.shape)) *
                     rt::dtypeSize(wide.dtype));
    if (failed(copyValue(source, part, wide.data.data())))
      return failure();
    rt::StatusOr<rt::HostTensor> narrow = rt::castTensor(
        wide, *toDType(parameter.getTensorType().getElementType()));
    if (!narrow)
      return parameter.emitOpError("cannot hold a cast of ")
             << castOf.getSource() << ": " << narrow.status().message();
    std::memcpy(out, narrow->data.data(), narrow->data.size());
    return success();
  }

  LogicalResult addKernel(plan::KernelOp kernel, rt::RankProgram &rank) {
    rt::Instruction instruction;
    instruction.kernel = kernel.getKernel().str();
    if (isCollective(kernel.getKernel())) {
      instruction.kind = rt::Instruction::Kind::Collective;
      if (failed(resolveRanks(kernel, rank.rank, instruction)))
        return failure();
    }
    instruction.loc = locationName(kernel.getLoc());
    instruction.action = actionName(kernel.getLoc());
    for (Value input : kernel.getInputs()) {
      FailureOr<rt::TensorRef> ref = reference(input);
      if (failed(ref))
        return failure();
      instruction.inputs.push_back(*ref);
    }
    for (Value output : kernel.getOutputs()) {
      FailureOr<rt::TensorRef> ref = reference(output);
      if (failed(ref))
        return failure();
      // A weight the step writes (a trained parameter, optimizer state)
      // persists across steps in the runtime.
      if (ref->space == rt::TensorRef::Space::Weight)
        plan.weights[ref->offset].state = true;
      instruction.outputs.push_back(*ref);
    }
    for (NamedAttribute attr : kernel.getKernelAttrs()) {
      std::string name = attr.getName().str();
      Attribute value = attr.getValue();
      if (auto integer = dyn_cast<IntegerAttr>(value))
        instruction.attrs[name] = integer.getInt();
      else if (auto real = dyn_cast<FloatAttr>(value))
        instruction.attrs[name] = real.getValueAsDouble();
      else if (auto text = dyn_cast<StringAttr>(value))
        instruction.attrs[name] = text.str();
      else if (auto list = dyn_cast<DenseI64ArrayAttr>(value))
        instruction.attrs[name] = std::vector<int64_t>(list.asArrayRef());
      // Rank lists were resolved to this rank's group or peer.
    }
    if (!kernel.getBody().empty() &&
        failed(addProgram(kernel.getBody().front(), instruction)))
      return failure();
    rank.instructions.push_back(std::move(instruction));
    return success();
  }

  /// Replaces a collective's rank lists by what they mean for `rank`: the id
  /// of its group in the plan (`group=`), or its peer (`peer=`).
  LogicalResult resolveRanks(plan::KernelOp kernel, int rank,
                             rt::Instruction &instruction) {
    DictionaryAttr attrs = kernel.getKernelAttrs();
    if (auto groups = attrs.getAs<ArrayAttr>("groups")) {
      for (Attribute attr : groups) {
        ArrayRef<int64_t> group = cast<DenseI64ArrayAttr>(attr).asArrayRef();
        if (!llvm::is_contained(group, rank))
          continue;
        std::vector<int> members(group.begin(), group.end());
        auto [it, inserted] = groupIds.try_emplace(members, plan.groups.size());
        if (inserted)
          plan.groups.push_back(members);
        instruction.attrs["group"] = int64_t(it->second);
        return success();
      }
      return kernel.emitOpError("runs on rank ")
             << rank << ", which is in none of its groups";
    }
    auto pairs = attrs.getAs<ArrayAttr>("pairs");
    if (!pairs)
      return kernel.emitOpError("needs 'groups' or 'pairs'");
    bool sending = kernel.getKernel() == "send";
    for (Attribute attr : pairs) {
      ArrayRef<int64_t> pair = cast<DenseI64ArrayAttr>(attr).asArrayRef();
      if (pair.size() == 2 && pair[sending ? 0 : 1] == rank) {
        instruction.attrs["peer"] = pair[sending ? 1 : 0];
        return success();
      }
    }
    return kernel.emitOpError("runs on rank ")
           << rank << ", which " << (sending ? "sends" : "receives")
           << " in none of its pairs";
  }

  /// Numbers the body's values (arguments first) and emits one program op
  /// per body op; broadcasts are free, the kernel broadcasts its loads.
  LogicalResult addProgram(Block &body, rt::Instruction &instruction) {
    llvm::DenseMap<Value, int> numbers;
    int next = 0;
    for (BlockArgument arg : body.getArguments())
      numbers[arg] = next++;
    for (Operation &op : body) {
      if (auto yield = dyn_cast<YieldOp>(op)) {
        for (Value value : yield.getValues())
          instruction.yields.push_back(numbers.lookup(value));
        continue;
      }
      if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
        numbers[broadcast.getResult()] = numbers.lookup(broadcast.getInput());
        continue;
      }
      rt::ProgramOp programOp;
      Type element = getElementTypeOrSelf(op.getResult(0).getType());
      std::optional<rt::DType> dtype = toDType(element);
      if (!dtype)
        return op.emitOpError("element type has no runtime equivalent");
      programOp.dtype = *dtype;
      for (Value operand : op.getOperands())
        programOp.operands.push_back(numbers.lookup(operand));
      programOp.op =
          llvm::TypeSwitch<Operation *, std::string>(&op)
              .Case([&](ConstantOp constant) {
                auto splat = cast<SplatElementsAttr>(constant.getValue());
                if (element.isIntOrIndex())
                  programOp.attrs["value"] =
                      double(element.isInteger(1)
                                 ? splat.getSplatValue<bool>()
                                 : splat.getSplatValue<APInt>().getSExtValue());
                else
                  programOp.attrs["value"] =
                      splat.getSplatValue<APFloat>().convertToDouble();
                return "const";
              })
              .Case([&](GeluOp gelu) {
                programOp.attrs["approximate"] =
                    stringifyGeluApproximation(gelu.getApproximate()).str();
                return "gelu";
              })
              .Case([&](CompareOp compare) {
                programOp.attrs["direction"] =
                    stringifyCompareDirection(compare.getDirection()).str();
                return "compare";
              })
              .Case([](BiasAddOp) { return "add"; })
              .Case([](AddOp) { return "add"; })
              .Case([](SubOp) { return "sub"; })
              .Case([](MulOp) { return "mul"; })
              .Case([](DivOp) { return "div"; })
              .Case([](PowOp) { return "pow"; })
              .Case([](SelectOp) { return "select"; })
              .Case([](CastOp) { return "cast"; })
              .Case([](SqrtOp) { return "sqrt"; })
              .Case([](RsqrtOp) { return "rsqrt"; })
              .Case([](ExpOp) { return "exp"; })
              .Case([](LogOp) { return "log"; })
              .Case([](NegOp) { return "neg"; })
              .Case([](ErfOp) { return "erf"; })
              .Case([](TanhOp) { return "tanh"; })
              .Case([](SigmoidOp) { return "sigmoid"; })
              .Case([](ReluOp) { return "relu"; })
              .Case([](ReciprocalOp) { return "reciprocal"; })
              .Case([](AbsOp) { return "abs"; })
              .Case([](SinOp) { return "sin"; })
              .Case([](CosOp) { return "cos"; })
              .Case([](FmodOp) { return "fmod"; })
              .Case([](MaximumOp) { return "max"; })
              .Case([](MinimumOp) { return "min"; })
              .Default([](Operation *) { return ""; });
      if (programOp.op.empty())
        return op.emitOpError("has no elementwise program equivalent");
      numbers[op.getResult(0)] = next++;
      instruction.program.push_back(std::move(programOp));
    }
    return success();
  }

  bool withValues;
  rt::Plan plan;
  /// The module's symbol tables, built once: parameters are looked up for
  /// every weight read of every rank, and a scan of the module's thousand
  /// parameters each time was a fifth of a 16-stage plan's build.
  SymbolTableCollection symbols;
  /// The world rank whose program is being added.
  /// The rank being added's position among its function's ranks: its
  /// device in the function's mesh.
  int meshPosition = 0;
  /// Only some ranks' programs are built (buildRepresentativePlan).
  bool someRanksOnly = false;
  /// Weight ids by parameter name and slice offsets (empty: whole).
  std::map<std::pair<Attribute, std::vector<int64_t>>, uint64_t, WeightKeyLess>
      weightIds;
  /// The weights that are `#loom.cast_of` copies, and their sources' names.
  struct CopySource {
    uint64_t id;
    Attribute source;
    ParameterOp parameter;
  };
  SmallVector<CopySource> copySources;
  std::map<std::vector<int>, size_t> groupIds;
};

/// The function each world rank runs: `name` (or the only function) on
/// every rank, or else the functions that say which ranks run them
/// (`loom.ranks`), which must cover each rank once.
FailureOr<SmallVector<func::FuncOp>> functionsByRank(ModuleOp module,
                                                     StringRef name) {
  int64_t worldSize = LoomDialect::getWorldSize(module);
  SmallVector<func::FuncOp> candidates;
  if (!name.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError("no function named '") << name << "'";
    candidates.push_back(func);
  } else {
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        candidates.push_back(func);
    if (candidates.empty())
      return module.emitError("the module has no function to run");
    if (candidates.size() > 1) {
      llvm::erase_if(candidates, [](func::FuncOp func) {
        return !func->hasAttr(LoomDialect::kRanksAttrName);
      });
      if (candidates.empty())
        return module.emitError("the module has several functions; name the "
                                "one to run, or give each the ranks that run "
                                "it (loom.ranks)");
    }
  }
  SmallVector<func::FuncOp> byRank(worldSize);
  for (func::FuncOp func : candidates)
    for (int64_t rank : LoomDialect::getRanksOf(func)) {
      if (byRank[rank])
        return func.emitOpError("runs on rank ")
               << rank << ", which @" << byRank[rank].getSymName()
               << " runs too";
      byRank[rank] = func;
    }
  for (auto [rank, func] : llvm::enumerate(byRank))
    if (!func)
      return module.emitError("no function runs on rank ")
             << rank << " of the module's loom.world_size " << worldSize;
  return byRank;
}

/// The plan of the lowered module: one program per rank.
FailureOr<rt::Plan> buildPlan(ModuleOp module, StringRef funcName,
                              bool withValues = true,
                              bool representativesOnly = false) {
  FailureOr<SmallVector<func::FuncOp>> byRank =
      functionsByRank(module, funcName);
  if (failed(byRank))
    return failure();
  PlanBuilder builder(withValues, representativesOnly);
  for (auto [rank, func] : llvm::enumerate(*byRank)) {
    // The other ranks of a function run its program on their own blocks.
    if (representativesOnly &&
        LoomDialect::getRanksOf(func).front() != int64_t(rank)) {
      builder.addEmptyRank(int(rank));
      continue;
    }
    if (failed(builder.addRank(func, int(rank))))
      return failure();
  }
  FailureOr<rt::Plan> built = builder.take(module);
  if (failed(built))
    return failure();
  rt::Plan plan = std::move(*built);
  if (representativesOnly)
    return plan;
  if (rt::Status status = rt::checkCommunication(plan); !status)
    return module.emitError("the ranks' communication does not match: ")
           << status.message();
  return plan;
}

} // namespace

FailureOr<rt::Plan> mlir::loom::buildRuntimePlan(ModuleOp module,
                                                 StringRef funcName) {
  return buildPlan(module, funcName);
}

FailureOr<rt::Plan> mlir::loom::buildShapesOnlyPlan(ModuleOp module,
                                                    StringRef funcName) {
  return buildPlan(module, funcName, /*withValues=*/false);
}

FailureOr<rt::Plan> mlir::loom::buildRepresentativePlan(ModuleOp module,
                                                        StringRef funcName) {
  return buildPlan(module, funcName, /*withValues=*/false,
                   /*representativesOnly=*/true);
}

FailureOr<rt::Plan> mlir::loom::lowerToRuntimePlan(ModuleOp module,
                                                   StringRef funcName) {
  // Checked before lowering, which would otherwise report a missing
  // function only after running every pass.
  if (failed(functionsByRank(module, funcName)))
    return failure();
  PassManager pm(module.getContext());
  buildLowerToPlanPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  return buildPlan(module, funcName);
}
