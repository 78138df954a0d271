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

#endif // LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD
