//===- Tensors.cpp - ONNX tensors and types as MLIR -----------------------===//

#include "Tensors.h"

#include "loom/Dialect/Loom/IR/LoomAttrs.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include <cstring>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

Type onnx_import::getElementType(MLIRContext *context, int32_t dataType) {
  Builder b(context);
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

std::string onnx_import::getDataTypeName(int32_t dataType) {
  if (!onnx::TensorProto::DataType_IsValid(dataType))
    return "<invalid data type " + std::to_string(dataType) + ">";
  return onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(dataType));
}

int64_t onnx_import::getElementByteSize(Type type) {
  return llvm::divideCeil(type.getIntOrFloatBitWidth(), 8);
}

TensorLoader::TensorLoader(MLIRContext *context, StringRef modelPath,
                           const ONNXImportOptions &options)
    : context(context), modelDir(llvm::sys::path::parent_path(modelPath)),
      options(options) {}

FailureOr<RankedTensorType>
TensorLoader::getType(const onnx::TensorProto &tensor, Location loc) {
  Type elementType = getElementType(context, tensor.data_type());
  if (!elementType)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has element type "
                          << getDataTypeName(tensor.data_type())
                          << ", which Loom does not support";
  SmallVector<int64_t> shape;
  int64_t elements = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0 || llvm::MulOverflow(elements, dim, elements))
      return emitError(loc)
             << "tensor '" << tensor.name()
             << "' has an invalid shape (dimension " << dim << ")";
    shape.push_back(dim);
  }
  int64_t bytes;
  if (llvm::MulOverflow(elements, getElementByteSize(elementType), bytes))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' is larger than 2^63 bytes";
  return RankedTensorType::get(shape, elementType);
}

/// True if every element of `bytes` repeats its first `elementBytes` bytes.
static bool isSplat(StringRef bytes, int64_t elementBytes) {
  for (size_t i = elementBytes; i < bytes.size(); i += elementBytes)
    if (std::memcmp(bytes.data(), bytes.data() + i, elementBytes) != 0)
      return false;
  return true;
}

FailureOr<Attribute>
TensorLoader::fromBytes(StringRef bytes, RankedTensorType type, bool forceDense,
                        std::unique_ptr<std::string> owner,
                        std::shared_ptr<llvm::MemoryBuffer> mapping,
                        StringRef name) {
  int64_t elementBytes = getElementByteSize(type.getElementType());
  int64_t elements = type.getNumElements();
  // Only in-memory payloads are scanned for splats: scanning a mapped file
  // would read every page of it.
  bool splat = elements > 0 && owner && isSplat(bytes, elementBytes);
  if (type.getElementType().isInteger(1)) {
    // MLIR packs i1 attributes in bits; ONNX stores one byte per element.
    SmallVector<bool> values;
    values.reserve(elements);
    for (char byte : bytes)
      values.push_back(byte != 0);
    return Attribute(DenseElementsAttr::get(type, values));
  }
  if (forceDense || splat || elements <= options.inlineElementLimit) {
    StringRef raw = splat ? bytes.take_front(elementBytes) : bytes;
    return Attribute(DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(raw.data(), raw.size())));
  }
  // Blobs alias the payload when it is suitably aligned: the blob's deleter
  // keeps the owning string or the file mapping alive.
  size_t alignment = elementBytes;
  ArrayRef<char> data(bytes.data(), bytes.size());
  AsmResourceBlob blob;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignment == 0) {
    blob = AsmResourceBlob(
        data, alignment,
        [owner = std::move(owner),
         mapping = std::move(mapping)](void *, size_t, size_t) mutable {
          owner.reset();
          mapping.reset();
        },
        /*dataIsMutable=*/false);
  } else {
    blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(data, alignment);
  }
  // Resource keys print unquoted, so they must be identifier-like to parse
  // back ("onnx::MatMul_12" would not); the manager uniquifies clashes.
  std::string key = name.str();
  for (char &c : key)
    if (!llvm::isAlnum(c) && c != '_' && c != '.')
      c = '_';
  return Attribute(DenseResourceElementsAttr::get(type, key, std::move(blob)));
}

/// Appends the bytes of `values` to `raw`.
template <typename T, typename Range>
static void appendBytes(std::string &raw, const Range &values) {
  for (auto value : values) {
    T converted = static_cast<T>(value);
    raw.append(reinterpret_cast<const char *>(&converted), sizeof(T));
  }
}

FailureOr<Attribute>
TensorLoader::fromTypedFields(const onnx::TensorProto &tensor,
                              RankedTensorType type, Location loc,
                              bool forceDense) {
  auto raw = std::make_unique<std::string>();
  int64_t count = 0;
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    appendBytes<float>(*raw, tensor.float_data());
    count = tensor.float_data_size();
    break;
  case onnx::TensorProto::DOUBLE:
    appendBytes<double>(*raw, tensor.double_data());
    count = tensor.double_data_size();
    break;
  case onnx::TensorProto::INT64:
    appendBytes<int64_t>(*raw, tensor.int64_data());
    count = tensor.int64_data_size();
    break;
  case onnx::TensorProto::INT32:
    appendBytes<int32_t>(*raw, tensor.int32_data());
    count = tensor.int32_data_size();
    break;
  case onnx::TensorProto::BOOL:
    appendBytes<uint8_t>(*raw, tensor.int32_data());
    count = tensor.int32_data_size();
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit floats are stored as their bit patterns in int32_data.
    appendBytes<uint16_t>(*raw, tensor.int32_data());
    count = tensor.int32_data_size();
    break;
  default:
    llvm_unreachable("element type checked by getType");
  }
  if (count != type.getNumElements())
    return emitError(loc) << "tensor '" << tensor.name() << "' holds " << count
                          << " values but its shape " << type << " needs "
                          << type.getNumElements();
  StringRef bytes = *raw;
  return fromBytes(bytes, type, forceDense, std::move(raw), nullptr,
                   tensor.name());
}

FailureOr<Attribute> TensorLoader::load(onnx::TensorProto &tensor,
                                        RankedTensorType type, Location loc,
                                        bool mayReference, bool forceDense) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return loadExternal(tensor, type, loc, mayReference, forceDense);
  int64_t expected =
      type.getNumElements() * getElementByteSize(type.getElementType());
  if (!tensor.has_raw_data())
    return fromTypedFields(tensor, type, loc, forceDense);
  if (static_cast<int64_t>(tensor.raw_data().size()) != expected)
    return emitError(loc) << "tensor '" << tensor.name() << "' has "
                          << tensor.raw_data().size()
                          << " bytes of raw data but " << type << " takes "
                          << expected;
  // Take the payload out of the protobuf instead of copying it.
  std::unique_ptr<std::string> owner(tensor.release_raw_data());
  StringRef bytes = *owner;
  return fromBytes(bytes, type, forceDense, std::move(owner), nullptr,
                   tensor.name());
}

FailureOr<std::shared_ptr<llvm::MemoryBuffer>>
TensorLoader::mapFile(StringRef path, Location loc) {
  auto it = mappedFiles.find(path);
  if (it != mappedFiles.end())
    return it->second;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read external data file '" << path
                          << "': " << buffer.getError().message();
  std::shared_ptr<llvm::MemoryBuffer> shared = std::move(*buffer);
  mappedFiles[path] = shared;
  return shared;
}

/// Parses a non-negative decimal external-data field.
static std::optional<int64_t> parseOffset(StringRef text) {
  int64_t value;
  if (text.getAsInteger(10, value) || value < 0)
    return std::nullopt;
  return value;
}

FailureOr<Attribute> TensorLoader::loadExternal(onnx::TensorProto &tensor,
                                                RankedTensorType type,
                                                Location loc, bool mayReference,
                                                bool forceDense) {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      std::optional<int64_t> value = parseOffset(entry.value());
      if (!value)
        return emitError(loc) << "tensor '" << tensor.name()
                              << "' has an invalid external data "
                              << entry.key() << " '" << entry.value() << "'";
      if (entry.key() == "offset")
        offset = *value;
      else
        length = *value;
    }
  }
  if (location.empty())
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has external data without a location";
  int64_t expected =
      type.getNumElements() * getElementByteSize(type.getElementType());
  if (length && *length != expected)
    return emitError(loc) << "tensor '" << tensor.name() << "' has " << *length
                          << " bytes of external data but " << type << " takes "
                          << expected;

  llvm::SmallString<256> path(location);
  if (!llvm::sys::path::is_absolute(path)) {
    path = modelDir;
    llvm::sys::path::append(path, location);
  }
  llvm::sys::fs::make_absolute(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  uint64_t fileSize;
  if (std::error_code error = llvm::sys::fs::file_size(path, fileSize))
    return emitError(loc) << "cannot read external data file '" << path
                          << "' of tensor '" << tensor.name()
                          << "': " << error.message();
  int64_t end;
  if (llvm::AddOverflow(offset, expected, end) ||
      static_cast<uint64_t>(end) > fileSize)
    return emitError(loc) << "tensor '" << tensor.name() << "' needs bytes ["
                          << offset << ", " << offset + expected << ") of '"
                          << path << "', which has only " << fileSize;

  if (mayReference && !forceDense &&
      options.externalWeights == ExternalWeights::Reference)
    return Attribute(ExternalDataAttr::get(context, path, offset, expected));
  FailureOr<std::shared_ptr<llvm::MemoryBuffer>> mapping = mapFile(path, loc);
  if (failed(mapping))
    return failure();
  StringRef bytes = (*mapping)->getBuffer().substr(offset, expected);
  return fromBytes(bytes, type, forceDense, nullptr, *mapping, tensor.name());
}
