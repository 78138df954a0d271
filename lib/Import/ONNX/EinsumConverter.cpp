//===- EinsumConverter.cpp - ONNX Einsum as transposes and a matmul -------===//
//
// Einsum with one or two operands, the forms exporters write (rotary
// frequencies `i,j->ij`, attention scores `bhid,bhjd->bhij`, relative
// positions `bhld,lrd->bhlr`, ...). Each label of a two-operand equation is
// a batch label (both operands and the output), a contracted label (both
// operands, not the output), a free label of one operand (it and the
// output), or a summed label of one operand (it alone), which is summed
// away first. Then each operand is transposed to [batch, free, contracted]
// (contracted, free for the right one) and reshaped to three dimensions,
// one batched matmul multiplies them, and the product is reshaped and
// transposed into the output's order. `...` stands for the same unnamed
// labels in every term, right-aligned and broadcast numpy-style. A label
// repeated within one term takes that operand's diagonal first.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {

/// One term of an equation: a label per dimension. Labels are letters;
/// the dimensions `...` covers get the labels 0, 1, ... (right-aligned, so
/// the same trailing ellipsis dimensions of all terms share labels).
using Term = SmallVector<int>;

struct Equation {
  SmallVector<Term> inputs;
  Term output;
};

/// Parses `equation` for operands of `ranks`; fails with a message.
FailureOr<Equation> parseEquation(NodeContext &ctx, StringRef equation,
                                  ArrayRef<int64_t> ranks) {
  std::string text;
  for (char c : equation)
    if (!llvm::isSpace(c))
      text.push_back(c);
  StringRef body = text;
  auto [lhs, rhs] = body.split("->");
  bool explicitOutput = body.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ranks.size())
    return ctx.emitError() << "equation '" << equation << "' has "
                           << terms.size() << " operand terms for "
                           << ranks.size() << " inputs";
  int64_t ellipsisRank = 0;
  auto parseTerm = [&](StringRef term, int64_t rank,
                       Term &labels) -> LogicalResult {
    size_t dots = term.find("...");
    int64_t named = int64_t(term.size()) - (dots == StringRef::npos ? 0 : 3);
    int64_t covered = rank - named;
    if (dots == StringRef::npos ? covered != 0 : covered < 0)
      return ctx.emitError()
             << "term '" << term << "' of equation '" << equation
             << "' does not fit an operand of rank " << rank;
    for (size_t i = 0; i < term.size(); ++i) {
      if (i == dots) {
        for (int64_t k = 0; k < covered; ++k)
          labels.push_back(int(ellipsisRank - covered + k));
        i += 2;
        continue;
      }
      char c = term[i];
      if (!llvm::isAlpha(c))
        return ctx.emitError() << "equation '" << equation << "' has label '"
                               << c << "'; labels are letters";
      labels.push_back(c);
    }
    return success();
  };
  // The ellipsis stands for as many dimensions as the largest operand has
  // beyond its named ones.
  for (auto [term, rank] : llvm::zip(terms, ranks))
    if (term.contains("..."))
      ellipsisRank =
          std::max<int64_t>(ellipsisRank, rank - (int64_t(term.size()) - 3));
  Equation result;
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    Term labels;
    if (failed(parseTerm(term, rank, labels)))
      return failure();
    result.inputs.push_back(labels);
  }
  if (explicitOutput) {
    if (failed(parseTerm(rhs,
                         rhs.contains("...")
                             ? int64_t(rhs.size()) - 3 + ellipsisRank
                             : int64_t(rhs.size()),
                         result.output)))
      return failure();
    for (int label : result.output)
      if (llvm::none_of(result.inputs, [&](const Term &t) {
            return llvm::is_contained(t, label);
          }))
        return ctx.emitError()
               << "equation '" << equation << "' has output label '"
               << char(label) << "' that no operand has";
  } else {
    // Implicit output: the ellipsis, then the labels seen once, sorted.
    for (int64_t k = 0; k < ellipsisRank; ++k)
      result.output.push_back(int(k));
    SmallVector<int> once;
    for (const Term &term : result.inputs)
      for (int label : term)
        if (label >= 'A' && llvm::count_if(result.inputs, [&](const Term &t) {
                              return llvm::is_contained(t, label);
                            }) == 1)
          once.push_back(label);
    llvm::sort(once);
    result.output.append(once.begin(), once.end());
  }
  return result;
}

/// The dimension of `label` in `term`, or -1.
int64_t dimOf(const Term &term, int label) {
  auto it = llvm::find(term, label);
  return it == term.end() ? -1 : int64_t(it - term.begin());
}

} // namespace

static LogicalResult convertEinsum(NodeContext &ctx) {
  unsigned count = ctx.getNode().input_size();
  if (count < 1 || count > 2)
    return ctx.emitError() << "Einsum with " << count
                           << " operands is not supported (one or two)";
  std::string text = ctx.getString("equation", "");
  SmallVector<int64_t> ranks;
  for (unsigned i = 0; i < count; ++i)
    ranks.push_back(ctx.getInputType(i).getRank());
  FailureOr<Equation> equation = parseEquation(ctx, text, ranks);
  if (failed(equation))
    return failure();
  Type element = ctx.getInputType(0).getElementType();
  if (!isa<FloatType>(element))
    return ctx.emitError() << "Einsum on " << element
                           << " is not supported (float operands only)";
  OpChain ops(ctx);
  // Sizes by label; ellipsis dimensions broadcast.
  llvm::DenseMap<int, int64_t> sizes;
  for (unsigned i = 0; i < count; ++i)
    for (auto [dim, label] : llvm::enumerate(equation->inputs[i])) {
      int64_t size = ctx.getInputType(i).getDimSize(dim);
      auto [it, inserted] = sizes.try_emplace(label, size);
      if (inserted || it->second == size || size == 1)
        continue;
      if (it->second == 1) {
        it->second = size;
        continue;
      }
      return ctx.emitError() << "equation '" << text << "': label '"
                             << (label < 'A' ? '.' : char(label))
                             << "' has sizes " << it->second << " and " << size;
    }
  auto inOutput = [&](int label) {
    return llvm::is_contained(equation->output, label);
  };
  // Each operand with its summed labels reduced away and its ellipsis
  // dimensions broadcast to their full size.
  SmallVector<Value> operands;
  SmallVector<Term> terms;
  for (unsigned i = 0; i < count; ++i) {
    Term term = equation->inputs[i];
    Value value = ctx.getInput(i);
    SmallVector<int64_t> full;
    for (int label : term)
      full.push_back(sizes[label]);
    value = ops.broadcast(value, full);
    // A label repeated within the term takes the diagonal: the two
    // dimensions moved last, merged, and every (n + 1)-th element gathered.
    for (size_t first = 0; first < term.size(); ++first) {
      auto repeat =
          llvm::find(ArrayRef<int>(term).drop_front(first + 1), term[first]);
      if (repeat == term.end())
        continue;
      size_t second = repeat - term.begin();
      int label = term[first];
      int64_t n = sizes[label];
      SmallVector<int64_t> order;
      Term rest;
      SmallVector<int64_t> shape;
      for (size_t dim = 0; dim < term.size(); ++dim)
        if (dim != first && dim != second) {
          order.push_back(dim);
          rest.push_back(term[dim]);
          shape.push_back(sizes[term[dim]]);
        }
      order.append({int64_t(first), int64_t(second)});
      shape.push_back(n * n);
      SmallVector<int64_t> diagonal;
      for (int64_t k = 0; k < n; ++k)
        diagonal.push_back(k * (n + 1));
      Value merged = ops.reshape(ops.transpose(value, order), shape);
      value = ops.make<GatherOp>(
          {merged, ops.indices({n}, diagonal)},
          {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(
                                     int64_t(shape.size()) - 1))});
      rest.push_back(label);
      term = rest;
      first = size_t(-1); // start over: the term changed
    }
    SmallVector<int64_t> summed;
    Term kept;
    for (auto [dim, label] : llvm::enumerate(term)) {
      bool elsewhere = count == 2 && dimOf(equation->inputs[1 - i], label) >= 0;
      if (!inOutput(label) && !elsewhere)
        summed.push_back(dim);
      else
        kept.push_back(label);
    }
    if (!summed.empty())
      value = ops.reduce<ReduceSumOp>(value, summed, /*keepdims=*/false);
    operands.push_back(value);
    terms.push_back(kept);
  }
  auto sizeOf = [&](ArrayRef<int> labels) {
    int64_t size = 1;
    for (int label : labels)
      size *= sizes[label];
    return size;
  };
  auto permutationTo = [&](const Term &from, ArrayRef<int> to) {
    SmallVector<int64_t> permutation;
    for (int label : to)
      permutation.push_back(dimOf(from, label));
    return permutation;
  };
  Term product;
  Value result;
  if (count == 1) {
    result = operands[0];
    product = terms[0];
  } else {
    Term batch, contracted, freeA, freeB;
    for (int label : terms[0]) {
      bool inB = dimOf(terms[1], label) >= 0;
      if (inB && inOutput(label))
        batch.push_back(label);
      else if (inB)
        contracted.push_back(label);
      else
        freeA.push_back(label);
    }
    for (int label : terms[1])
      if (dimOf(terms[0], label) < 0)
        freeB.push_back(label);
    Term orderA = batch, orderB = batch;
    orderA.append(freeA.begin(), freeA.end());
    orderA.append(contracted.begin(), contracted.end());
    orderB.append(contracted.begin(), contracted.end());
    orderB.append(freeB.begin(), freeB.end());
    int64_t b = sizeOf(batch), m = sizeOf(freeA), k = sizeOf(contracted),
            n = sizeOf(freeB);
    Value lhs = ops.reshape(
        ops.transpose(operands[0], permutationTo(terms[0], orderA)), {b, m, k});
    Value rhs = ops.reshape(
        ops.transpose(operands[1], permutationTo(terms[1], orderB)), {b, k, n});
    result = ops.make<MatmulOp>({lhs, rhs});
    product = batch;
    product.append(freeA.begin(), freeA.end());
    product.append(freeB.begin(), freeB.end());
    SmallVector<int64_t> productShape;
    for (int label : product)
      productShape.push_back(sizes[label]);
    result = ops.reshape(result, productShape);
  }
  result = ops.transpose(result, permutationTo(product, equation->output));
  return ops.setOutput(0, result);
}

void onnx_import::registerEinsumConverter(ConverterRegistry &registry) {
  registry.add("Einsum", {12}, convertEinsum);
}
