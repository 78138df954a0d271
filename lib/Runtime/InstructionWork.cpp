//===- InstructionWork.cpp - What a plan instruction computes and moves ---===//

#include "loom/Runtime/InstructionWork.h"

#include <algorithm>

using namespace loomrt;

namespace {

int64_t dimFromEnd(const TensorRef &ref, size_t fromEnd) {
  if (ref.shape.size() < fromEnd)
    return 1;
  return ref.shape[ref.shape.size() - fromEnd];
}

const char *precisionOf(loomrt::DType dtype) {
  return dtype == loomrt::DType::BF16  ? "bf16"
         : dtype == loomrt::DType::F16 ? "f16"
         : dtype == loomrt::DType::F64 ? "f64"
                                       : "f32";
}

/// The executed and Megatron-counted FLOPs of an attention kernel, forward
/// or backward: 2 * rows * Sk * (D + Dv) for the forward's two products,
/// rows = batch * heads * Sq (lse's elements).
void attentionWork(const Instruction &inst, bool backward,
                   InstructionWork &work) {
  bool packed = intAttrOr(inst.attrs, "packed_qkv", 0) != 0;
  bool seqMajor = intAttrOr(inst.attrs, "seq_major", 0) != 0;
  if (inst.inputs.empty())
    return;
  const TensorRef &q = inst.inputs[0];
  double rows = 0, sk = 0, d = double(dimFromEnd(q, 1)), dv = d;
  if (backward) {
    // q, k, v, dout, lse, out or qkv, dout, lse, out.
    size_t lse = packed ? 2 : 4;
    if (inst.inputs.size() <= lse)
      return;
    rows = double(inst.inputs[lse].elements());
    dv = double(dimFromEnd(inst.inputs[packed ? 1 : 3], 1));
  } else {
    if (inst.outputs.size() < 2)
      return;
    rows = double(inst.outputs[1].elements());
    dv = double(dimFromEnd(inst.outputs[0], 1));
  }
  if (packed)
    sk = double(dimFromEnd(q, 4));
  else if (inst.inputs.size() > 1)
    sk = double(dimFromEnd(inst.inputs[1], seqMajor ? 3 : 2));
  double forward = 2 * rows * sk * (d + dv);
  // The backward recomputes q k^T and runs four more products (dv, dp, dq,
  // dk): 2.5 forwards executed, 2 as Megatron counts it.
  work.gemmFlops = backward ? 2.5 * forward : forward;
  work.modelFlops = backward ? 2 * forward : forward;
  work.gemmMinDim = std::min({d, dv, sk});
  work.scores = rows * sk;
  work.rowElements = rows * d;
  work.precision = precisionOf(q.dtype);
}

} // namespace

InstructionWork loomrt::estimateInstructionWork(const Instruction &inst) {
  InstructionWork work;
  for (const TensorRef &ref : inst.inputs)
    work.bytes += double(ref.bytes());
  for (const TensorRef &ref : inst.outputs)
    work.bytes += double(ref.bytes());
  // A slice reads what it writes, and a lookup the rows it gathers, not
  // their whole source: a microbatch's slice of the step's batch costs the
  // same whatever the microbatch count.
  if (inst.kind == Instruction::Kind::Kernel &&
      (inst.kernel == "slice" || inst.kernel == "gather") &&
      !inst.inputs.empty() && !inst.outputs.empty())
    work.bytes +=
        double(inst.outputs[0].bytes()) - double(inst.inputs[0].bytes());
  if (inst.kind != Instruction::Kind::Kernel)
    return work;
  if (inst.kernel == "matmul" && inst.inputs.size() >= 2 &&
      !inst.outputs.empty()) {
    const TensorRef &a = inst.inputs[0], &b = inst.inputs[1];
    bool ta = intAttrOr(inst.attrs, "transpose_lhs", 0) != 0;
    bool tb = intAttrOr(inst.attrs, "transpose_rhs", 0) != 0;
    double m = double(dimFromEnd(a, ta ? 1 : 2));
    double k = double(dimFromEnd(a, ta ? 2 : 1));
    double n = double(dimFromEnd(b, tb ? 2 : 1));
    double batch = double(inst.outputs[0].elements()) / std::max(1.0, m * n);
    work.gemmFlops = work.modelFlops = 2 * batch * m * n * k;
    work.gemmMinDim = std::min({m, n, k});
    work.precision = precisionOf(a.dtype);
  } else if (inst.kernel == "attention") {
    attentionWork(inst, /*backward=*/false, work);
  } else if (inst.kernel == "attention_backward") {
    attentionWork(inst, /*backward=*/true, work);
  } else if (inst.kernel == "elementwise") {
    // Every operation of the program runs over the outputs' common shape.
    double elements = 0;
    for (const TensorRef &ref : inst.outputs)
      elements = std::max(elements, double(ref.elements()));
    for (const ProgramOp &op : inst.program)
      if (op.op != "const")
        work.elementOps[op.op] += elements;
  }
  return work;
}
