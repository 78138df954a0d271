//===- LoomTraits.h - Loom op traits ----------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMTRAITS_H
#define LOOM_DIALECT_LOOM_IR_LOOMTRAITS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir {
namespace loom {

/// True if the element count of `type` fits in int64_t, so that shape
/// arithmetic (getNumElements, products of dimensions) cannot overflow.
bool hasRepresentableElementCount(ShapedType type);

namespace opimpl {
LogicalResult verifyTensorSizes(Operation *op);
} // namespace opimpl

/// Rejects operands and results whose element count does not fit in 64 bits,
/// before any other verifier multiplies dimensions. Every loom op has it.
template <typename ConcreteType>
class ValidTensorSizes
    : public OpTrait::TraitBase<ConcreteType, ValidTensorSizes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return opimpl::verifyTensorSizes(op);
  }
};

/// Marks a kernel-level op (LoomKernelOps.td): one that only exists after
/// loom-lower-to-plan's fusion passes, which autodiff, sharding propagation
/// and the partitioner never see. Every other loom op is a graph op.
template <typename ConcreteType>
class KernelOpTrait : public OpTrait::TraitBase<ConcreteType, KernelOpTrait> {};

/// Opts a graph op out of FactorRuleOpInterface, which every other graph op
/// implements: only ops that compute nothing on tensors (the module-level
/// `loom.mesh` and `loom.parameter` symbols) have it.
template <typename ConcreteType>
class NoFactorRule : public OpTrait::TraitBase<ConcreteType, NoFactorRule> {};

/// Whether `op` is a kernel-level loom op (has KernelOpTrait).
inline bool isKernelOp(Operation *op) { return op->hasTrait<KernelOpTrait>(); }

/// Verifies an op whose result types follow from its operands and
/// attributes: runs the op's `inferReturnTypes` with the op's location, so a
/// shape error is reported once and precisely, then checks the declared
/// result types against the inferred ones (equal, unless the op's
/// isCompatibleReturnTypes accepts others). Listed before
/// InferTypeOpInterface, whose own verifier would otherwise add a generic
/// "failed to infer returned types" to every such error.
template <typename ConcreteType>
class VerifyInferredTypes
    : public OpTrait::TraitBase<ConcreteType, VerifyInferredTypes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    SmallVector<Type, 2> inferred;
    typename ConcreteType::Adaptor adaptor(cast<ConcreteType>(op));
    if (failed(ConcreteType::inferReturnTypes(op->getContext(), op->getLoc(),
                                              adaptor, inferred)))
      return failure();
    if (ConcreteType::isCompatibleReturnTypes(inferred, op->getResultTypes()))
      return success();
    InFlightDiagnostic diag = op->emitOpError();
    diag << (inferred.size() == 1 ? "has result type " : "has result types ");
    llvm::interleaveComma(op->getResultTypes(), diag,
                          [&](Type type) { diag << type; });
    diag << " but its operands and attributes give ";
    llvm::interleaveComma(inferred, diag, [&](Type type) { diag << type; });
    return diag;
  }
};

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOM_IR_LOOMTRAITS_H
