//===- Tensors.h - ONNX tensors and types as MLIR ---------------*- C++ -*-===//
//
// Element types, tensor types and TensorProto payloads (inline, typed-field
// and external data) converted to MLIR types and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_TENSORS_H
#define LOOM_LIB_IMPORT_ONNX_TENSORS_H

#include "loom/Import/ONNX/ImportONNX.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include <memory>

namespace mlir {
namespace loom {
namespace onnx_import {

/// The element type Loom uses for ONNX data type `dataType`, or null.
Type getElementType(MLIRContext *context, int32_t dataType);

/// The ONNX name of `dataType` ("FLOAT", "INT64", ...).
std::string getDataTypeName(int32_t dataType);

/// Bytes one element of `type` takes in ONNX raw data (i1 takes one byte).
int64_t getElementByteSize(Type type);

/// Turns TensorProto payloads into attributes. Large raw payloads are moved,
/// not copied, into `dense_resource` blobs; external files are mapped once
/// and shared by every tensor that lives in them.
class TensorLoader {
public:
  TensorLoader(MLIRContext *context, llvm::StringRef modelPath,
               const ONNXImportOptions &options);

  /// The static tensor type of `tensor`, or an error at `loc`.
  FailureOr<RankedTensorType> getType(const onnx::TensorProto &tensor,
                                      Location loc);

  /// The value of `tensor` (whose payload may be moved out). `mayReference`
  /// allows a `#loom.external_data` reference for external data in
  /// reference mode; otherwise the result is an ElementsAttr. `forceDense`
  /// asks for a DenseElementsAttr whatever the size (values the importer
  /// computes with).
  FailureOr<Attribute> load(onnx::TensorProto &tensor, RankedTensorType type,
                            Location loc, bool mayReference,
                            bool forceDense = false);

private:
  FailureOr<Attribute> loadExternal(onnx::TensorProto &tensor,
                                    RankedTensorType type, Location loc,
                                    bool mayReference, bool forceDense);
  FailureOr<Attribute> fromBytes(llvm::StringRef bytes, RankedTensorType type,
                                 bool forceDense,
                                 std::unique_ptr<std::string> owner,
                                 std::shared_ptr<llvm::MemoryBuffer> mapping,
                                 llvm::StringRef name);
  FailureOr<Attribute> fromTypedFields(const onnx::TensorProto &tensor,
                                       RankedTensorType type, Location loc,
                                       bool forceDense);
  FailureOr<std::shared_ptr<llvm::MemoryBuffer>> mapFile(llvm::StringRef path,
                                                         Location loc);

  MLIRContext *context;
  std::string modelDir;
  const ONNXImportOptions &options;
  llvm::StringMap<std::shared_ptr<llvm::MemoryBuffer>> mappedFiles;
};

} // namespace onnx_import
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_IMPORT_ONNX_TENSORS_H
