//===- LoomInterfaces.td - Loom op interfaces --------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD
#define LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD

include "mlir/IR/OpBase.td"

def Loom_FactorRuleOpInterface : OpInterface<"FactorRuleOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    Describes an op's iteration space as a list of *factors* and maps every
    operand and result dimension onto them, the way MLIR mesh's iterator
    types + indexing maps and OpenXLA Shardy's op sharding rules do.

    Each factor has a size and a kind:
    * `parallel`: appears in results; sharding it needs no communication;
    * `contracting`: a summed product (matmul's K, the rows a gather picks);
      sharding it leaves the results `partial<sum>`;
    * `reduction_sum` / `reduction_max`: reduced away; sharding it leaves the
      results `partial<sum>` / `partial<max>`;
    * `need_replication`: the op must see the whole factor (a softmax axis,
      the normalized dims of a layer norm, a sliced or concatenated axis).

    A tensor dimension is the product of a list of factors, major to minor
    (a reshape from `[B, S, D]` to `[B, S, H, Dh]` maps `D` to `[H, Dh]`);
    a broadcast size-1 dimension maps to no factor. Sharding propagation,
    the SPMD partitioner and the cost model all read this one rule.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Returns the factor rule of this op for its current types.",
      /*retTy=*/"::mlir::loom::FactorRule",
      /*methodName=*/"getFactorRule">,
  ];
}

def Loom_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    The reverse-mode rule of a differentiable op: maps the adjoints of its
    results to adjoints of its operands, built from loom ops. `loom-autodiff`
    asks every op on the path from the parameters to the loss for it; an op
    without it "has no gradient rule".

    Declared with the dialect but implemented as external models attached
    by `registerGradientExternalModels(DialectRegistry &)`
    (lib/Transforms/Training/GradientRules.cpp, declared in
    `loom/InitAllDialects.h`), so the dialect does not depend on the code
    that builds backward graphs. `loom-autodiff` adds them to the context
    itself (its dependent-dialect registry); `registerAllDialects` adds them
    for tools. Whether op X has a gradient rule is
    `isa<GradientOpInterface>(op)`.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        Propagates `resultGradients`, the adjoints of the op's results (null
        where a result has none), to the op's active operands through
        `context`. Fails, with an error at the op, where the rule does not
        cover the case.
      }],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"backpropagate",
      /*args=*/(ins "::llvm::ArrayRef<::mlir::Value>":$resultGradients,
                    "::mlir::loom::GradientContext &":$context)>,
  ];
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD
