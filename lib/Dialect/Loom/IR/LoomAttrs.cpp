//===- LoomAttrs.cpp - Mesh and sharding attributes -----------------------===//

#include "loom/Dialect/Loom/IR/LoomAttrs.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::loom;

#include "loom/Dialect/Loom/IR/LoomEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomAttrs.cpp.inc"

void LoomDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/Loom/IR/LoomAttrs.cpp.inc"
      >();
}

/// Axis names are printed as bare keywords, so they must be identifiers.
static bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name.drop_front(),
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseAxis))
    return {};
  return parser.getChecked<MeshAttr>(parser.getContext(), names, sizes);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(
      llvm::zip(getAxisNames(), getAxisSizes()), printer, [&](auto axis) {
        printer << std::get<0>(axis).getValue() << " = " << std::get<1>(axis);
      });
  printer << ">";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axisNames,
                               ArrayRef<int64_t> axisSizes) {
  if (axisNames.size() != axisSizes.size())
    return emitError() << "mesh has " << axisNames.size() << " axis names but "
                       << axisSizes.size() << " sizes";
  if (axisNames.empty())
    return emitError() << "a mesh needs at least one axis";
  llvm::StringSet<> seen;
  int64_t devices = 1;
  for (auto [name, size] : llvm::zip(axisNames, axisSizes)) {
    if (!isIdentifier(name.getValue()))
      return emitError() << "mesh axis name '" << name.getValue()
                         << "' is not an identifier";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is declared twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue() << "' has size "
                         << size << "; sizes must be positive";
    if (llvm::MulOverflow(devices, size, devices))
      return emitError() << "mesh has more devices than fit in 64 bits";
  }
  return success();
}

std::optional<unsigned> MeshAttr::getAxisIndex(StringRef name) const {
  for (auto [index, axis] : llvm::enumerate(getAxisNames()))
    if (axis.getValue() == name)
      return index;
  return std::nullopt;
}

int64_t MeshAttr::getAxisSize(StringRef name) const {
  std::optional<unsigned> index = getAxisIndex(name);
  assert(index && "unknown mesh axis");
  return getAxisSizes()[*index];
}

int64_t MeshAttr::getNumDevices() const {
  int64_t devices = 1;
  for (int64_t size : getAxisSizes())
    devices *= size;
  return devices;
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

/// The marker that ends the axis list of an open dimension (`{tp, ?}`):
/// sharding propagation may add axes after the listed ones.
static constexpr llvm::StringLiteral kOpenMarker = "?";

/// Parses `{axis, axis, ...}` into an array of string attributes; where
/// `allowOpen`, a trailing `?` marks the dimension open.
static ParseResult parseAxisSet(AsmParser &parser, ArrayAttr &axes,
                                bool allowOpen = false) {
  SmallVector<Attribute> names;
  bool open = false;
  auto parseName = [&]() -> ParseResult {
    if (open)
      return parser.emitError(parser.getCurrentLocation(),
                              "'?' must be the last entry of a dimension");
    if (allowOpen && succeeded(parser.parseOptionalQuestion())) {
      open = true;
      names.push_back(parser.getBuilder().getStringAttr(kOpenMarker));
      return success();
    }
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseName))
    return failure();
  axes = parser.getBuilder().getArrayAttr(names);
  return success();
}

static void printAxisSet(AsmPrinter &printer, ArrayAttr axes) {
  printer << "{";
  llvm::interleaveComma(axes, printer, [&](Attribute axis) {
    printer << llvm::cast<StringAttr>(axis).getValue();
  });
  printer << "}";
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  StringAttr meshName;
  SmallVector<Attribute> dims;
  if (parser.parseLess() || parser.parseSymbolName(meshName) ||
      parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() -> ParseResult {
                                       ArrayAttr axes;
                                       if (parseAxisSet(parser, axes,
                                                        /*allowOpen=*/true))
                                         return failure();
                                       dims.push_back(axes);
                                       return success();
                                     }))
    return {};

  PartialKind partialKind = PartialKind::none;
  ArrayAttr partialAxes = parser.getBuilder().getArrayAttr({});
  if (succeeded(parser.parseOptionalComma())) {
    std::string kind;
    SMLoc kindLoc;
    if (parser.parseKeyword("partial") || parser.parseLess() ||
        (kindLoc = parser.getCurrentLocation(), false) ||
        parser.parseKeywordOrString(&kind) || parser.parseGreater())
      return {};
    std::optional<PartialKind> parsed = symbolizePartialKind(kind);
    if (!parsed || *parsed == PartialKind::none) {
      parser.emitError(kindLoc)
          << "expected 'sum' or 'max', got '" << kind << "'";
      return {};
    }
    partialKind = *parsed;
    if (parseAxisSet(parser, partialAxes))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(
      parser.getContext(), FlatSymbolRefAttr::get(meshName),
      parser.getBuilder().getArrayAttr(dims), partialKind, partialAxes);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printSymbolName(getMesh().getValue());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer, [&](Attribute dim) {
    printAxisSet(printer, llvm::cast<ArrayAttr>(dim));
  });
  printer << "]";
  if (getPartialKind() != PartialKind::none) {
    printer << ", partial<" << stringifyPartialKind(getPartialKind()) << "> ";
    printAxisSet(printer, getPartialAxes());
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   PartialKind partialKind,
                                   ArrayAttr partialAxes) {
  if (!mesh)
    return emitError() << "sharding needs a mesh symbol";
  llvm::StringSet<> seen;
  auto checkAxes = [&](ArrayAttr axes, bool allowOpen) -> LogicalResult {
    for (auto [index, axis] : llvm::enumerate(axes)) {
      auto name = llvm::dyn_cast<StringAttr>(axis);
      if (!name)
        return emitError() << "sharding axes must be strings, got " << axis;
      if (name.getValue() == kOpenMarker) {
        if (!allowOpen || index + 1 != axes.size())
          return emitError() << "'?' (an open dimension) may only end the "
                                "axes of a dimension";
        continue;
      }
      if (!isIdentifier(name.getValue()))
        return emitError() << "sharding axis name '" << name.getValue()
                           << "' is not an identifier";
      if (!seen.insert(name.getValue()).second)
        return emitError() << "mesh axis '" << name.getValue()
                           << "' is used more than once in a sharding";
    }
    return success();
  };
  for (Attribute dim : dims) {
    auto axes = llvm::dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each sharded dimension must be a list of axes";
    if (failed(checkAxes(axes, /*allowOpen=*/true)))
      return failure();
  }
  if (failed(checkAxes(partialAxes, /*allowOpen=*/false)))
    return failure();
  if (partialKind == PartialKind::none && !partialAxes.empty())
    return emitError() << "partial axes given without a partial kind";
  if (partialKind != PartialKind::none && partialAxes.empty())
    return emitError() << "partial<" << stringifyPartialKind(partialKind)
                       << "> needs at least one mesh axis";
  return success();
}

ShardingAttr ShardingAttr::get(MLIRContext *context, FlatSymbolRefAttr mesh,
                               ArrayRef<SmallVector<StringRef>> dimAxes,
                               PartialKind partialKind,
                               ArrayRef<StringRef> partialAxes) {
  Builder builder(context);
  SmallVector<Attribute> dims;
  for (const SmallVector<StringRef> &axes : dimAxes)
    dims.push_back(builder.getStrArrayAttr(axes));
  return get(context, mesh, builder.getArrayAttr(dims), partialKind,
             builder.getStrArrayAttr(partialAxes));
}

static SmallVector<StringRef> toStringRefs(ArrayAttr array) {
  SmallVector<StringRef> names;
  for (Attribute axis : array)
    if (StringRef name = llvm::cast<StringAttr>(axis).getValue();
        name != kOpenMarker)
      names.push_back(name);
  return names;
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  return toStringRefs(llvm::cast<ArrayAttr>(getDims()[dim]));
}

bool ShardingAttr::isDimOpen(unsigned dim) const {
  auto axes = llvm::cast<ArrayAttr>(getDims()[dim]);
  return !axes.empty() &&
         llvm::cast<StringAttr>(axes[axes.size() - 1]).getValue() ==
             kOpenMarker;
}

SmallVector<StringRef> ShardingAttr::getPartialAxesNames() const {
  return toStringRefs(getPartialAxes());
}

bool ShardingAttr::isFullyReplicated() const {
  return getPartialKind() == PartialKind::none &&
         llvm::all_of(llvm::seq(getRank()),
                      [&](unsigned dim) { return getDimAxes(dim).empty(); });
}

//===----------------------------------------------------------------------===//
// Verification against a mesh and a type
//===----------------------------------------------------------------------===//

FailureOr<MeshAttr> mlir::loom::lookupMesh(Operation *from,
                                           FlatSymbolRefAttr name,
                                           SymbolTableCollection *tables) {
  Operation *symbol = tables ? tables->lookupNearestSymbolFrom(from, name)
                             : SymbolTable::lookupNearestSymbolFrom(from, name);
  if (!symbol)
    return from->emitOpError()
           << "refers to mesh " << name << ", which is not defined";
  auto mesh = llvm::dyn_cast<MeshOp>(symbol);
  if (!mesh)
    return from->emitOpError()
           << "refers to " << name << " as a mesh, but it is not a loom.mesh";
  return mesh.getMesh();
}

LogicalResult
mlir::loom::verifySharding(ShardingAttr sharding, MeshAttr mesh, Type type,
                           function_ref<InFlightDiagnostic()> emitError) {
  auto tensorType = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return emitError() << "a sharding describes a ranked tensor, not " << type;
  if (sharding.getRank() != tensorType.getRank())
    return emitError() << "sharding has " << sharding.getRank()
                       << " dimension(s) but " << type << " has rank "
                       << tensorType.getRank();

  auto checkKnown = [&](StringRef axis) -> LogicalResult {
    if (mesh.getAxisIndex(axis))
      return success();
    InFlightDiagnostic diag = emitError();
    diag << "unknown mesh axis '" << axis << "'; mesh " << sharding.getMesh()
         << " has axes ";
    llvm::interleaveComma(mesh.getAxisNames(), diag,
                          [&](StringAttr name) { diag << name.getValue(); });
    return diag;
  };
  for (StringRef axis : sharding.getPartialAxesNames())
    if (failed(checkKnown(axis)))
      return failure();
  for (unsigned dim = 0; dim < sharding.getRank(); ++dim) {
    int64_t shards = 1;
    SmallVector<StringRef> axes = sharding.getDimAxes(dim);
    for (StringRef axis : axes) {
      if (failed(checkKnown(axis)))
        return failure();
      // Cannot overflow for a verified mesh; checked for hand-built ones.
      if (llvm::MulOverflow(shards, mesh.getAxisSize(axis), shards))
        return emitError() << "dimension " << dim
                           << " is split into more shards than fit in 64 bits";
    }
    int64_t size = tensorType.getDimSize(dim);
    if (ShapedType::isDynamic(size)) {
      if (axes.empty())
        continue;
      return emitError() << "dimension " << dim << " of " << type
                         << " is dynamic; only static dimensions can be split";
    }
    if (size % shards != 0)
      return emitError() << "dimension " << dim << " of " << type
                         << " has size " << size << ", which " << shards
                         << " shards do not divide evenly";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ExternalDataAttr
//===----------------------------------------------------------------------===//

LogicalResult
ExternalDataAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         StringRef path, int64_t offset, int64_t length) {
  if (path.empty())
    return emitError() << "external data needs a file path";
  if (offset < 0 || length < 0)
    return emitError() << "external data offset and length must be "
                          "non-negative, got offset "
                       << offset << " and length " << length;
  int64_t end;
  if (llvm::AddOverflow(offset, length, end))
    return emitError() << "external data ends past 2^63 bytes";
  return success();
}

LogicalResult mlir::loom::verifyShardingOf(Operation *op, ShardingAttr sharding,
                                           Type type, StringRef what,
                                           SymbolTableCollection *tables) {
  FailureOr<MeshAttr> mesh = lookupMesh(op, sharding.getMesh(), tables);
  if (failed(mesh))
    return failure();
  return verifySharding(sharding, *mesh, type, [&]() {
    return op->emitOpError() << "has an invalid sharding of " << what << ": ";
  });
}

RankedTensorType mlir::loom::getShardType(RankedTensorType global,
                                          ShardingAttr sharding,
                                          MeshAttr mesh) {
  SmallVector<int64_t> shape(global.getShape());
  for (unsigned dim = 0; dim < sharding.getRank() && dim < shape.size();
       ++dim) {
    if (ShapedType::isDynamic(shape[dim]))
      continue;
    for (StringRef axis : sharding.getDimAxes(dim))
      shape[dim] /= mesh.getAxisSize(axis);
  }
  return RankedTensorType::get(shape, global.getElementType(),
                               global.getEncoding());
}

RankedTensorType mlir::loom::getShardType(Operation *from,
                                          RankedTensorType global,
                                          ShardingAttr sharding,
                                          SymbolTableCollection &tables) {
  auto mesh = llvm::dyn_cast_or_null<MeshOp>(
      tables.lookupNearestSymbolFrom(from, sharding.getMesh()));
  if (!mesh || sharding.getRank() != global.getRank())
    return {};
  for (unsigned dim = 0; dim < sharding.getRank(); ++dim)
    for (StringRef axis : sharding.getDimAxes(dim))
      if (!mesh.getMesh().getAxisIndex(axis))
        return {};
  return getShardType(global, sharding, mesh.getMesh());
}
