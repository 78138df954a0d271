//===- MarkPaddingRows.cpp - Padding rows of embedding lookups ------------===//
//
// nn.Embedding(padding_idx=ROW) zeroes row ROW at initialization and never
// trains it; the ONNX export keeps only the lookup. The user says which row
// (loom-run's --padding-idx), and the pass warns about tables that look like
// such an embedding, since training them otherwise diverges from PyTorch.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Support/NameRegex.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringSet.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMARKPADDINGROWS
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// The rows of an f32 [rows, width] parameter value that are all zeros, or
/// nothing when the value is not at hand (shapes only, external data).
SmallVector<int64_t> zeroRows(ParameterOp parameter) {
  auto type = dyn_cast<RankedTensorType>(parameter.getType());
  std::optional<Attribute> value = parameter.getInitialValue();
  if (!type || !value || type.getRank() != 2 || !type.getElementType().isF32())
    return {};
  ArrayRef<float> data;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(*value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return {};
    ArrayRef<char> raw = blob->getData();
    data = ArrayRef<float>(reinterpret_cast<const float *>(raw.data()),
                           raw.size() / sizeof(float));
  } else if (auto dense = dyn_cast<DenseElementsAttr>(*value)) {
    if (dense.isSplat())
      return {};
    ArrayRef<char> raw = dense.getRawData();
    data = ArrayRef<float>(reinterpret_cast<const float *>(raw.data()),
                           raw.size() / sizeof(float));
  }
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  if (int64_t(data.size()) != rows * width || width == 0)
    return {};
  SmallVector<int64_t> zeros;
  for (int64_t row = 0; row < rows; ++row)
    if (llvm::all_of(data.slice(row * width, width),
                     [](float x) { return x == 0.0f; }))
      zeros.push_back(row);
  return zeros;
}

/// The parameter an embedding lookup (an axis-0 gather) reads, or null.
ParamOp lookupTable(GatherOp gather) {
  auto param = gather.getInput().getDefiningOp<ParamOp>();
  return param && gather.getAxis() == 0 ? param : ParamOp();
}

struct MarkPaddingRowsPass
    : impl::LoomMarkPaddingRowsBase<MarkPaddingRowsPass> {
  using LoomMarkPaddingRowsBase::LoomMarkPaddingRowsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (const std::string &entry : paddingIdx)
      if (failed(mark(module, entry)))
        return signalPassFailure();
    warnAboutPaddingRows(module);
  }

  /// Applies one REGEX=ROW entry.
  LogicalResult mark(ModuleOp module, StringRef entry) {
    auto [text, rowText] = entry.rsplit('=');
    int64_t row;
    if (rowText.getAsInteger(10, row) || text.empty())
      return module.emitError()
             << "--padding-idx expects REGEX=ROW, got '" << entry << "'";
    std::string error;
    std::unique_ptr<NameRegex> pattern = NameRegex::compile(text.str(), error);
    if (!pattern)
      return module.emitError() << "--padding-idx '" << text
                                << "' is not a valid regular expression";
    int marked = 0;
    WalkResult result = module.walk([&](GatherOp gather) {
      ParamOp param = lookupTable(gather);
      if (!param || !pattern->search(param.getName().str()))
        return WalkResult::advance();
      int64_t rows = gather.getInput().getType().getDimSize(0);
      if (row < -rows || row >= rows) {
        module.emitError() << "--padding-idx " << text << "=" << row
                           << ": parameter '" << param.getName() << "' has "
                           << rows << " rows";
        return WalkResult::interrupt();
      }
      gather.setPaddingIdx(row);
      ++marked;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
    if (marked == 0)
      return module.emitError()
             << "--padding-idx '" << text
             << "' matches no parameter read by an embedding lookup";
    return success();
  }

  /// Warns about embedding tables that look like nn.Embedding(padding_idx)
  /// but have no padding row.
  void warnAboutPaddingRows(ModuleOp module) {
    llvm::StringSet<> warned;
    module.walk([&](GatherOp gather) {
      ParamOp param = lookupTable(gather);
      if (!param || gather.getPaddingIdx() || warned.contains(param.getName()))
        return;
      auto parameter =
          module.lookupSymbol<ParameterOp>(param.getNameAttr().getAttr());
      if (!parameter || !parameter.getTrainable())
        return;
      SmallVector<int64_t> zeros = zeroRows(parameter);
      if (zeros.size() != 1 ||
          cast<RankedTensorType>(parameter.getType()).getDimSize(0) < 3)
        return;
      warned.insert(param.getName());
      std::string escaped;
      for (char c : param.getName()) {
        if (StringRef(".^$|()[]{}*+?\\").contains(c))
          escaped += '\\';
        escaped += c;
      }
      emitWarning(parameter.getLoc())
          << "embedding '" << param.getName() << "': row " << zeros.front()
          << " is all zeros, as nn.Embedding(padding_idx=" << zeros.front()
          << ") initializes it, and PyTorch never trains that row, which an "
             "ONNX export cannot say; pass --padding-idx '^"
          << escaped << "$=" << zeros.front() << "' to train as PyTorch does";
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
