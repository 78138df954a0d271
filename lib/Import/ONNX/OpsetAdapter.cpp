//===- OpsetAdapter.cpp - Newer ONNX opsets onto libonnx's schemas --------===//

#include "OpsetAdapter.h"

#include "GraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <map>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {

/// The attribute that marks a node kept at its own op version until the
/// adaptation ends (then it is removed and the versions are returned).
constexpr const char *kNativeVersion = "loom.native_version";

void markNative(onnx::NodeProto &node, int version) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(kNativeVersion);
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(version);
}

/// How a node at a newer op version becomes a node libonnx's opset-17
/// schemas describe.
enum class Adaptation {
  /// The newer version only added element types Loom has no tensors of
  /// (float8, int4, strings, ...) or attributes that only matter for them:
  /// the node is valid as it is, less those attributes.
  Same,
  /// Reduce*-18: the `axes` input becomes the attribute again.
  AxesToAttribute,
  /// Split-18: Split-13 when it has its `split` input; kept at version 18
  /// when it has `num_outputs`.
  Split18,
  /// No opset-17 form: the node keeps its version (Gelu-20).
  Native,
  /// Changed in a way Loom does not import.
  Unsupported,
};

struct Change {
  const char *op;
  int since;
  Adaptation how;
  /// Attributes the version added that the opset-17 schema lacks.
  const char *dropped = nullptr;
};

/// Every default-domain operator with a new version in opsets 18-21 (the
/// ONNX operator changelog). An op not listed kept its opset-17 version.
const Change kChanges[] = {
    // Opset 18.
    {"BitwiseAnd", 18, Adaptation::Unsupported},
    {"BitwiseNot", 18, Adaptation::Unsupported},
    {"BitwiseOr", 18, Adaptation::Unsupported},
    {"BitwiseXor", 18, Adaptation::Unsupported},
    {"CenterCropPad", 18, Adaptation::Unsupported},
    {"Col2Im", 18, Adaptation::Unsupported},
    {"GroupNormalization", 18, Adaptation::Unsupported},
    {"LpPool", 18, Adaptation::Unsupported},
    {"Mish", 18, Adaptation::Unsupported},
    {"OptionalGetElement", 18, Adaptation::Unsupported},
    {"OptionalHasElement", 18, Adaptation::Unsupported},
    {"Pad", 18, Adaptation::Unsupported},
    {"ReduceL1", 18, Adaptation::AxesToAttribute},
    {"ReduceL2", 18, Adaptation::AxesToAttribute},
    {"ReduceLogSum", 18, Adaptation::AxesToAttribute},
    {"ReduceLogSumExp", 18, Adaptation::AxesToAttribute},
    {"ReduceMax", 18, Adaptation::AxesToAttribute},
    {"ReduceMean", 18, Adaptation::AxesToAttribute},
    {"ReduceMin", 18, Adaptation::AxesToAttribute},
    {"ReduceProd", 18, Adaptation::AxesToAttribute},
    {"ReduceSumSquare", 18, Adaptation::AxesToAttribute},
    {"Resize", 18, Adaptation::Unsupported},
    {"ScatterElements", 18, Adaptation::Same},
    {"ScatterND", 18, Adaptation::Unsupported},
    {"Split", 18, Adaptation::Split18},
    // Opset 19.
    {"AveragePool", 19, Adaptation::Unsupported},
    {"Cast", 19, Adaptation::Same, "saturate"},
    {"CastLike", 19, Adaptation::Same, "saturate"},
    {"Constant", 19, Adaptation::Same},
    {"DeformConv", 19, Adaptation::Unsupported},
    {"DequantizeLinear", 19, Adaptation::Unsupported},
    {"Equal", 19, Adaptation::Same},
    {"Identity", 19, Adaptation::Same},
    {"If", 19, Adaptation::Unsupported},
    {"Loop", 19, Adaptation::Unsupported},
    {"Pad", 19, Adaptation::Unsupported},
    {"QuantizeLinear", 19, Adaptation::Unsupported},
    {"Reshape", 19, Adaptation::Same},
    {"Resize", 19, Adaptation::Unsupported},
    {"Scan", 19, Adaptation::Unsupported},
    {"Shape", 19, Adaptation::Same},
    {"Size", 19, Adaptation::Same},
    // Opset 20.
    {"AffineGrid", 20, Adaptation::Unsupported},
    {"ConstantOfShape", 20, Adaptation::Same},
    {"DFT", 20, Adaptation::Unsupported},
    {"Gelu", 20, Adaptation::Native},
    {"GridSample", 20, Adaptation::Unsupported},
    {"ImageDecoder", 20, Adaptation::Unsupported},
    {"IsInf", 20, Adaptation::Same},
    {"IsNaN", 20, Adaptation::Same},
    {"ReduceMax", 20, Adaptation::AxesToAttribute},
    {"ReduceMin", 20, Adaptation::AxesToAttribute},
    {"RegexFullMatch", 20, Adaptation::Unsupported},
    {"StringConcat", 20, Adaptation::Unsupported},
    {"StringSplit", 20, Adaptation::Unsupported},
    // Opset 21.
    {"Cast", 21, Adaptation::Same, "saturate"},
    {"CastLike", 21, Adaptation::Same, "saturate"},
    {"Constant", 21, Adaptation::Same},
    {"ConstantOfShape", 21, Adaptation::Same},
    {"DequantizeLinear", 21, Adaptation::Unsupported},
    {"Flatten", 21, Adaptation::Same},
    {"GroupNormalization", 21, Adaptation::Unsupported},
    {"Identity", 21, Adaptation::Same},
    {"If", 21, Adaptation::Unsupported},
    {"Loop", 21, Adaptation::Unsupported},
    {"Pad", 21, Adaptation::Unsupported},
    {"QLinearMatMul", 21, Adaptation::Unsupported},
    {"QuantizeLinear", 21, Adaptation::Unsupported},
    {"Reshape", 21, Adaptation::Same},
    {"Scan", 21, Adaptation::Unsupported},
    {"Shape", 21, Adaptation::Same},
    {"Size", 21, Adaptation::Same},
    {"Squeeze", 21, Adaptation::Same},
    {"Transpose", 21, Adaptation::Same},
    {"Unsqueeze", 21, Adaptation::Same},
};

/// The newest change of `op` at `opset` (since-version in 18..opset).
const Change *newestChange(const std::string &op, int64_t opset) {
  const Change *found = nullptr;
  for (const Change &change : kChanges)
    if (op == change.op && change.since <= opset &&
        (!found || change.since > found->since))
      found = &change;
  return found;
}

void removeAttribute(onnx::NodeProto &node, const char *name) {
  auto *attributes = node.mutable_attribute();
  for (int i = 0; i < attributes->size(); ++i)
    if (attributes->Get(i).name() == name) {
      attributes->DeleteSubrange(i, 1);
      return;
    }
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          const char *name) {
  for (const onnx::AttributeProto &attribute : node.attribute())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

/// The int64/int32 values of a TensorProto (inline or raw data).
std::optional<std::vector<int64_t>> tensorInts(const onnx::TensorProto &t) {
  std::vector<int64_t> values;
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (t.has_raw_data()) {
      const std::string &raw = t.raw_data();
      values.resize(raw.size() / 8);
      std::memcpy(values.data(), raw.data(), values.size() * 8);
    } else {
      values.assign(t.int64_data().begin(), t.int64_data().end());
    }
    return values;
  }
  if (t.data_type() == onnx::TensorProto::INT32) {
    if (t.has_raw_data()) {
      const std::string &raw = t.raw_data();
      std::vector<int32_t> narrow(raw.size() / 4);
      std::memcpy(narrow.data(), raw.data(), narrow.size() * 4);
      values.assign(narrow.begin(), narrow.end());
    } else {
      values.assign(t.int32_data().begin(), t.int32_data().end());
    }
    return values;
  }
  return std::nullopt;
}

class Adapter {
public:
  Adapter(onnx::ModelProto &model, int64_t opset, MLIRContext *context)
      : model(model), opset(opset), context(context) {
    for (const onnx::TensorProto &tensor : model.graph().initializer())
      initializers[tensor.name()] = &tensor;
    for (const onnx::NodeProto &node : model.graph().node())
      if (node.op_type() == "Constant" && node.domain().empty() &&
          node.output_size() == 1)
        constants[node.output(0)] = &node;
  }

  LogicalResult run() {
    onnx::GraphProto &graph = *model.mutable_graph();
    for (onnx::NodeProto &node : *graph.mutable_node()) {
      if (!node.domain().empty() && node.domain() != "ai.onnx")
        continue;
      const Change *change = newestChange(node.op_type(), opset);
      if (!change)
        continue;
      switch (change->how) {
      case Adaptation::Same:
        if (change->dropped)
          removeAttribute(node, change->dropped);
        break;
      case Adaptation::AxesToAttribute:
        if (failed(axesToAttribute(node, *change)))
          return failure();
        break;
      case Adaptation::Split18:
        // With its `split` input it is Split-13; with `num_outputs` (parts
        // of ceil(size / n), the last smaller) the converter needs the
        // input's size, which only Loom's type inference knows here.
        if (const onnx::AttributeProto *count =
                findAttribute(node, "num_outputs")) {
          if (count->i() != node.output_size())
            return error(node)
                   << "num_outputs is " << count->i() << " but the node has "
                   << node.output_size() << " outputs";
          markNative(node, change->since);
        }
        break;
      case Adaptation::Native:
        markNative(node, change->since);
        break;
      case Adaptation::Unsupported:
        return error(node) << node.op_type() << "-" << change->since
                           << " (the version at opset " << opset
                           << ") is not supported";
      }
    }
    for (onnx::OperatorSetIdProto &entry : *model.mutable_opset_import())
      if (entry.domain().empty() || entry.domain() == "ai.onnx")
        entry.set_version(kAdaptedOpset);
    return success();
  }

private:
  InFlightDiagnostic error(const onnx::NodeProto &node) {
    Location loc = getNodeLoc(context, node);
    return mlir::emitError(loc)
           << "node '" << cast<NameLoc>(loc).getName().getValue() << "' ("
           << node.op_type() << ", opset " << opset << "): ";
  }

  /// The compile-time constant ints `name` holds, if it is an initializer
  /// or a Constant node's output.
  std::optional<std::vector<int64_t>> constantInts(const std::string &name) {
    if (const onnx::TensorProto *tensor = initializers.lookup(name))
      return tensorInts(*tensor);
    if (const onnx::NodeProto *node = constants.lookup(name)) {
      if (const onnx::AttributeProto *value = findAttribute(*node, "value"))
        return tensorInts(value->t());
      if (const onnx::AttributeProto *ints = findAttribute(*node, "value_ints"))
        return std::vector<int64_t>(ints->ints().begin(), ints->ints().end());
      if (const onnx::AttributeProto *one = findAttribute(*node, "value_int"))
        return std::vector<int64_t>{one->i()};
    }
    return std::nullopt;
  }

  LogicalResult axesToAttribute(onnx::NodeProto &node, const Change &change) {
    std::vector<int64_t> axes;
    if (node.input_size() > 1 && !node.input(1).empty()) {
      std::optional<std::vector<int64_t>> given = constantInts(node.input(1));
      if (!given) {
        // Computed from constants further up (a Reshape of them, say):
        // the converter folds that, at the node's own version.
        markNative(node, change.since);
        return success();
      }
      axes = *given;
    }
    if (node.input_size() > 1)
      node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
    const onnx::AttributeProto *noop =
        findAttribute(node, "noop_with_empty_axes");
    bool identity = axes.empty() && noop && noop->i() != 0;
    removeAttribute(node, "noop_with_empty_axes");
    if (identity) {
      // Reduces nothing: the input itself.
      node.set_op_type("Identity");
      node.clear_attribute();
      return success();
    }
    if (!axes.empty()) {
      onnx::AttributeProto *attribute = node.add_attribute();
      attribute->set_name("axes");
      attribute->set_type(onnx::AttributeProto::INTS);
      for (int64_t axis : axes)
        attribute->add_ints(axis);
    }
    return success();
  }

  onnx::ModelProto &model;
  int64_t opset;
  MLIRContext *context;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<const onnx::NodeProto *> constants;
};

//===----------------------------------------------------------------------===//
// Local functions
//===----------------------------------------------------------------------===//

class Inliner {
public:
  Inliner(onnx::ModelProto &model, MLIRContext *context)
      : model(model), context(context) {
    for (const onnx::FunctionProto &function : model.functions())
      functions[function.domain() + "::" + function.name()] = &function;
  }

  LogicalResult run() {
    if (functions.empty())
      return success();
    onnx::GraphProto &graph = *model.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> inlined;
    for (const onnx::NodeProto &node : graph.node())
      if (failed(expand(node, inlined, 0)))
        return failure();
    graph.mutable_node()->Swap(&inlined);
    model.clear_functions();
    return success();
  }

private:
  const onnx::FunctionProto *functionOf(const onnx::NodeProto &node) {
    auto it = functions.find(node.domain() + "::" + node.op_type());
    return it == functions.end() ? nullptr : it->second;
  }

  LogicalResult expand(const onnx::NodeProto &node,
                       google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                       int depth) {
    const onnx::FunctionProto *function = functionOf(node);
    if (!function) {
      *out.Add() = node;
      return success();
    }
    Location loc = getNodeLoc(context, node);
    // Calls that fan out (or recurse) could expand without bound.
    if (++expanded > kMaxInlinedNodes)
      return mlir::emitError(loc)
             << "node '" << cast<NameLoc>(loc).getName().getValue()
             << "': inlining local functions exceeds " << kMaxInlinedNodes
             << " nodes";
    if (depth > 32)
      return mlir::emitError(loc)
             << "node '" << cast<NameLoc>(loc).getName().getValue()
             << "': local function '" << function->name()
             << "' calls itself too deeply (recursion?)";
    if (node.input_size() > function->input_size() ||
        node.output_size() > function->output_size())
      return mlir::emitError(loc)
             << "node '" << cast<NameLoc>(loc).getName().getValue()
             << "' calls local function '" << function->name() << "' with "
             << node.input_size() << " inputs and " << node.output_size()
             << " outputs; it has " << function->input_size() << " and "
             << function->output_size();
    // Formal -> actual names; everything else the body defines gets a name
    // unique to this call.
    std::map<std::string, std::string> names;
    for (int i = 0; i < function->input_size(); ++i)
      names[function->input(i)] = i < node.input_size() ? node.input(i) : "";
    for (int i = 0; i < function->output_size(); ++i)
      names[function->output(i)] = i < node.output_size() ? node.output(i) : "";
    std::string caller = !node.name().empty()     ? node.name()
                         : node.output_size() > 0 ? node.output(0)
                                                  : std::string("call");
    std::string prefix =
        caller + "/" + function->name() + "/" + std::to_string(calls++) + "/";
    std::map<std::string, const onnx::AttributeProto *> actuals;
    for (const onnx::AttributeProto &attribute : node.attribute())
      actuals[attribute.name()] = &attribute;
    for (const onnx::NodeProto &body : function->node()) {
      onnx::NodeProto copy = body;
      auto rename = [&](std::string *name) {
        if (name->empty())
          return;
        auto it = names.find(*name);
        if (it == names.end())
          it = names.emplace(*name, prefix + *name).first;
        *name = it->second;
      };
      for (std::string &input : *copy.mutable_input())
        rename(&input);
      for (std::string &output : *copy.mutable_output())
        rename(&output);
      copy.set_name(prefix +
                    (body.name().empty() ? body.op_type() : body.name()));
      // Attribute references take the caller's value, or are dropped (the
      // op's default applies).
      auto *attributes = copy.mutable_attribute();
      for (int i = attributes->size() - 1; i >= 0; --i) {
        onnx::AttributeProto &attribute = *attributes->Mutable(i);
        if (attribute.ref_attr_name().empty())
          continue;
        auto it = actuals.find(attribute.ref_attr_name());
        if (it == actuals.end()) {
          attributes->DeleteSubrange(i, 1);
          continue;
        }
        std::string name = attribute.name();
        attribute = *it->second;
        attribute.set_name(name);
      }
      if (failed(expand(copy, out, depth + 1)))
        return failure();
    }
    return success();
  }

  onnx::ModelProto &model;
  MLIRContext *context;
  std::map<std::string, const onnx::FunctionProto *> functions;
  int calls = 0;
  int64_t expanded = 0;
  static constexpr int64_t kMaxInlinedNodes = 1 << 22;
};

/// torch.export writes `x.split(n)` as SplitToSequence and one SequenceAt
/// per piece. Where every user of the sequence is a SequenceAt at a
/// constant position, the pair becomes one SplitToSequence node (kept at
/// version 11: its converter splits) whose outputs are those pieces, at the
/// positions its `loom.positions` attribute lists.
void fuseSplitSequences(onnx::ModelProto &model) {
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers[tensor.name()] = &tensor;
  llvm::StringMap<const onnx::NodeProto *> constants;
  llvm::StringMap<std::vector<int>> users;
  for (int index = 0; index < graph.node_size(); ++index) {
    const onnx::NodeProto &node = graph.node(index);
    if (node.op_type() == "Constant" && node.output_size() == 1)
      constants[node.output(0)] = &node;
    for (const std::string &input : node.input())
      users[input].push_back(index);
  }
  auto constantInt = [&](const std::string &name) -> std::optional<int64_t> {
    std::optional<std::vector<int64_t>> values;
    if (const onnx::TensorProto *tensor = initializers.lookup(name))
      values = tensorInts(*tensor);
    else if (const onnx::NodeProto *node = constants.lookup(name))
      if (const onnx::AttributeProto *value = findAttribute(*node, "value"))
        values = tensorInts(value->t());
    if (!values || values->size() != 1)
      return std::nullopt;
    return values->front();
  };
  std::vector<bool> erase(graph.node_size(), false);
  bool fused = false;
  for (int index = 0; index < graph.node_size(); ++index) {
    onnx::NodeProto &split = *graph.mutable_node(index);
    if (split.op_type() != "SplitToSequence" || !split.domain().empty() ||
        split.output_size() != 1)
      continue;
    std::vector<int> readers = users.lookup(split.output(0));
    bool fusible = !readers.empty();
    std::vector<int64_t> positions;
    std::vector<std::string> outputs;
    for (int reader : readers) {
      const onnx::NodeProto &at = graph.node(reader);
      std::optional<int64_t> position;
      if (at.op_type() == "SequenceAt" && at.input_size() == 2 &&
          at.input(0) == split.output(0))
        position = constantInt(at.input(1));
      if (!position) {
        fusible = false;
        break;
      }
      positions.push_back(*position);
      outputs.push_back(at.output(0));
    }
    for (const onnx::ValueInfoProto &output : graph.output())
      fusible &= output.name() != split.output(0);
    if (!fusible)
      continue;
    for (int reader : readers)
      erase[reader] = true;
    split.clear_output();
    for (const std::string &output : outputs)
      split.add_output(output);
    onnx::AttributeProto *attribute = split.add_attribute();
    attribute->set_name("loom.positions");
    attribute->set_type(onnx::AttributeProto::INTS);
    for (int64_t position : positions)
      attribute->add_ints(position);
    markNative(split, 11);
    fused = true;
  }
  if (!fused)
    return;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int index = 0; index < graph.node_size(); ++index)
    if (!erase[index])
      *kept.Add() = graph.node(index);
  graph.mutable_node()->Swap(&kept);
}

} // namespace

FailureOr<OpsetAdaptation> onnx_import::adaptModel(onnx::ModelProto &model,
                                                   int64_t opset,
                                                   int64_t libonnxOpset,
                                                   MLIRContext *context) {
  fuseSplitSequences(model);
  if (opset > libonnxOpset && failed(Adapter(model, opset, context).run()))
    return failure();
  OpsetAdaptation result;
  for (onnx::NodeProto &node : *model.mutable_graph()->mutable_node()) {
    result.nativeVersions.push_back(0);
    auto *attributes = node.mutable_attribute();
    for (int i = 0; i < attributes->size(); ++i)
      if (attributes->Get(i).name() == kNativeVersion) {
        result.nativeVersions.back() = int(attributes->Get(i).i());
        result.lenientInference = true;
        attributes->DeleteSubrange(i, 1);
        break;
      }
  }
  return result;
}

LogicalResult onnx_import::inlineLocalFunctions(onnx::ModelProto &model,
                                                MLIRContext *context) {
  return Inliner(model, context).run();
}
