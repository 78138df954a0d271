// RUN: loom-opt --loom-decompose-gelu-grad --split-input-file %s | FileCheck %s
// RUN: loom-opt --loom-decompose-gelu-grad --split-input-file --verify-diagnostics %S/Inputs/decompose-gelu-grad-errors.mlir
// The spelled-out derivatives are checked numerically against finite
// differences by autodiff-gradients.test (gelu); this checks their shape.

// The exact GELU: grad * (Phi(x) + x phi(x)).
// CHECK-LABEL: func.func @exact
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<8xf32>, %[[X:[^:]*]]: tensor<8xf32>)
// CHECK-DAG:   %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:   %[[X2:.*]] = loom.mul %[[X]], %[[X]] : tensor<8xf32>
// CHECK-DAG:   %[[RT:.*]] = loom.constant dense<0.707106769> : tensor<f32>
// CHECK:       %[[XS:.*]] = loom.mul %[[X]], %[[RT]]
// CHECK-NEXT:  %[[ERF:.*]] = loom.erf %[[XS]]
// CHECK-NEXT:  %[[ERF1:.*]] = loom.add %[[ERF]], %[[ONE]]
// CHECK-NEXT:  %[[HALF:.*]] = loom.constant dense<5.000000e-01>
// CHECK-NEXT:  %[[CDF:.*]] = loom.mul %[[ERF1]], %[[HALF]]
// CHECK-NEXT:  %[[M:.*]] = loom.constant dense<-5.000000e-01>
// CHECK-NEXT:  %[[E:.*]] = loom.mul %[[X2]], %[[M]]
// CHECK-NEXT:  %[[EXP:.*]] = loom.exp %[[E]]
// CHECK-NEXT:  %[[NORM:.*]] = loom.constant dense<0.398942292>
// CHECK-NEXT:  %[[PDF:.*]] = loom.mul %[[EXP]], %[[NORM]]
// CHECK-NEXT:  %[[XPDF:.*]] = loom.mul %[[X]], %[[PDF]]
// CHECK-NEXT:  %[[D:.*]] = loom.add %[[CDF]], %[[XPDF]]
// CHECK-NEXT:  %[[R:.*]] = loom.mul %[[DY]], %[[D]]
// CHECK-NEXT:  return %[[R]]
func.func @exact(%dy: tensor<8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = loom.gelu_grad %dy, %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// The tanh form, with t = tanh(k (x + 0.044715 x^3)):
// grad * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)).
// CHECK-LABEL: func.func @tanh
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4xf32>, %[[X:[^:]*]]: tensor<2x4xf32>)
// CHECK:       %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:  %[[X2:.*]] = loom.mul %[[X]], %[[X]]
// CHECK-NEXT:  %[[X3:.*]] = loom.mul %[[X2]], %[[X]]
// CHECK-NEXT:  %[[C:.*]] = loom.constant dense<4.471500e-02>
// CHECK-NEXT:  %[[CX3:.*]] = loom.mul %[[X3]], %[[C]]
// CHECK-NEXT:  %[[IN:.*]] = loom.add %[[X]], %[[CX3]]
// CHECK-NEXT:  %[[K:.*]] = loom.constant dense<0.797884583>
// CHECK-NEXT:  %[[U:.*]] = loom.mul %[[IN]], %[[K]]
// CHECK-NEXT:  %[[T:.*]] = loom.tanh %[[U]]
// CHECK-NEXT:  %[[C3:.*]] = loom.constant dense<1.341450e-01>
// CHECK-NEXT:  %[[C3X2:.*]] = loom.mul %[[X2]], %[[C3]]
// CHECK-NEXT:  %[[DIN:.*]] = loom.add %[[ONE]], %[[C3X2]]
// CHECK-NEXT:  %[[K2:.*]] = loom.constant dense<0.797884583>
// CHECK-NEXT:  %[[DU:.*]] = loom.mul %[[DIN]], %[[K2]]
// CHECK-NEXT:  %[[H:.*]] = loom.constant dense<5.000000e-01>
// CHECK-NEXT:  %[[HX:.*]] = loom.mul %[[X]], %[[H]]
// CHECK-NEXT:  %[[T2:.*]] = loom.mul %[[T]], %[[T]]
// CHECK-NEXT:  %[[SECH2:.*]] = loom.sub %[[ONE]], %[[T2]]
// CHECK-NEXT:  %[[T1:.*]] = loom.add %[[ONE]], %[[T]]
// CHECK-NEXT:  %[[H2:.*]] = loom.constant dense<5.000000e-01>
// CHECK-NEXT:  %[[OUTER:.*]] = loom.mul %[[T1]], %[[H2]]
// CHECK-NEXT:  %[[SD:.*]] = loom.mul %[[SECH2]], %[[DU]]
// CHECK-NEXT:  %[[INNER:.*]] = loom.mul %[[HX]], %[[SD]]
// CHECK-NEXT:  %[[D:.*]] = loom.add %[[OUTER]], %[[INNER]]
// CHECK-NEXT:  %[[R:.*]] = loom.mul %[[DY]], %[[D]]
// CHECK-NEXT:  return %[[R]]
func.func @tanh(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = loom.gelu_grad %dy, %x approximate tanh : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
