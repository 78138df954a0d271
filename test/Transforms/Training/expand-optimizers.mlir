// RUN: loom-opt --loom-expand-optimizers --split-input-file %s | FileCheck %s
// RUN: loom-opt --loom-expand-optimizers --split-input-file --verify-diagnostics %S/Inputs/expand-optimizers-errors.mlir

// SGD with weight decay and dampened momentum: the first-step dampening
// switch is f64 math on the step count, cast once; then d = g + wd*p,
// buf' = m*buf + c*d, p' = p - lr*buf'.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[S:[^:]*]]: tensor<f64>, %[[B:[^:]*]]: tensor<4xf32>)
// CHECK:         %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f64>
// CHECK:         %[[FIRST:.*]] = loom.compare eq, %[[S]], %[[ONE]]
// CHECK:         %[[C64:.*]] = loom.select %[[FIRST]], %[[ONE]], %{{.*}}
// CHECK:         %[[C:.*]] = loom.cast %[[C64]] : tensor<f64> -> tensor<f32>
// CHECK:         %[[WD:.*]] = loom.mul %[[P]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[D:.*]] = loom.add %[[G]], %[[WD]] : tensor<4xf32>
// CHECK:         %[[MB:.*]] = loom.mul %[[B]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[CD:.*]] = loom.mul %[[D]], %[[C]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[BUF:.*]] = loom.add %[[MB]], %[[CD]] : tensor<4xf32>
// CHECK:         %[[STEP:.*]] = loom.mul %[[BUF]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[NEW:.*]] = loom.sub %[[P]], %[[STEP]] : tensor<4xf32>
// CHECK-NOT:     loom.sgd_update
// CHECK:         return %[[NEW]], %[[BUF]]
func.func @sgd(%p: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<f64>, %buf: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = loom.sgd_update %p, %g, %step, %buf {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.5 : f64, weight_decay = 0.01 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Nesterov: d = g + m*buf' after the buffer update.
// CHECK-LABEL: func.func @nesterov(
// CHECK:         %[[BUF:.*]] = loom.add %{{.*}}, %arg1 : tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = loom.constant dense<0.899999976> : tensor<f32>
// CHECK-NEXT:    %[[LOOK:.*]] = loom.mul %[[BUF]], %[[M]]
// CHECK-NEXT:    %[[DIR:.*]] = loom.add %arg1, %[[LOOK]] : tensor<4xf32>
// CHECK:         loom.mul %[[DIR]]
func.func @nesterov(%p: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<f64>, %buf: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = loom.sgd_update %p, %g, %step, %buf {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Plain SGD is p - lr*g, nothing else.
// CHECK-LABEL: func.func @plain_sgd(
// CHECK-NEXT:    %[[LR:.*]] = loom.constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT:    %[[U:.*]] = loom.mul %arg1, %[[LR]]
// CHECK-NEXT:    %[[NEW:.*]] = loom.sub %arg0, %[[U]]
// CHECK-NEXT:    return %[[NEW]]
func.func @plain_sgd(%p: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  %0 = loom.sgd_update %p, %g, %step {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// AdamW: bias corrections in f64 from the step count (1 - beta^t), cast
// once; decoupled weight decay p*(1 - lr*wd) before the update.
// CHECK-LABEL: func.func @adamw(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[S:[^:]*]]: tensor<f64>, %[[M:[^:]*]]: tensor<4xf32>, %[[V:[^:]*]]: tensor<4xf32>)
// CHECK:         %[[B1:.*]] = loom.constant dense<9.000000e-01> : tensor<f64>
// CHECK-NEXT:    %[[B1T:.*]] = loom.pow %[[B1]], %[[S]] : tensor<f64>
// CHECK:         %[[BC1:.*]] = loom.sub %{{.*}}, %[[B1T]] : tensor<f64>
// CHECK-NEXT:    %[[B2:.*]] = loom.constant dense<0.99899999999999999> : tensor<f64>
// CHECK-NEXT:    %[[B2T:.*]] = loom.pow %[[B2]], %[[S]] : tensor<f64>
// CHECK:         %[[BC2:.*]] = loom.sub %{{.*}}, %[[B2T]] : tensor<f64>
// CHECK:         %[[SS64:.*]] = loom.div %{{.*}}, %[[BC1]] : tensor<f64>
// CHECK-NEXT:    %[[SS:.*]] = loom.cast %[[SS64]] : tensor<f64> -> tensor<f32>
// CHECK-NEXT:    %[[BC2R:.*]] = loom.sqrt %[[BC2]] : tensor<f64>
// CHECK-NEXT:    %[[BC2S:.*]] = loom.cast %[[BC2R]] : tensor<f64> -> tensor<f32>
// CHECK:         %[[DECAY:.*]] = loom.constant dense<0.999899983> : tensor<f32>
// CHECK:         %[[PD:.*]] = loom.mul %[[P]], %[[DECAY]]
// CHECK:         %[[M1:.*]] = loom.add
// CHECK:         %[[GG:.*]] = loom.mul %[[G]], %[[G]] : tensor<4xf32>
// CHECK:         %[[V1:.*]] = loom.add
// CHECK:         %[[R:.*]] = loom.sqrt %[[V1]] : tensor<4xf32>
// CHECK:         %[[RD:.*]] = loom.div %[[R]], %[[BC2S]]
// CHECK:         %[[DEN:.*]] = loom.add %[[RD]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[Q:.*]] = loom.div %[[M1]], %[[DEN]] : tensor<4xf32>
// CHECK:         %[[U:.*]] = loom.mul %[[Q]], %[[SS]]
// CHECK:         %[[NEW:.*]] = loom.sub %[[PD]], %[[U]] : tensor<4xf32>
// CHECK:         return %[[NEW]], %[[M1]], %[[V1]]
func.func @adamw(%p: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<f64>, %m: tensor<4xf32>, %v: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0:3 = loom.adamw_update %p, %g, %step, %m, %v {lr = 0.01 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The step-dependent scalars are built right after the step count, ahead
// of the gradient's producer, so that the update can fuse with it; the
// update itself stays at the optimizer op.
// CHECK-LABEL: func.func @scalars_at_the_step(
// CHECK:         %[[S:.*]] = loom.add %arg2, %{{.*}} : tensor<f64>
// CHECK-NEXT:    loom.constant dense<9.000000e-01> : tensor<f64>
// CHECK-NEXT:    loom.pow %{{.*}}, %[[S]] : tensor<f64>
// CHECK:         loom.cast %{{.*}} : tensor<f64> -> tensor<f32>
// CHECK:         %[[G:.*]] = loom.exp %arg1
// CHECK:         loom.mul %arg0, %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @scalars_at_the_step(%p: tensor<4xf32>, %x: tensor<4xf32>, %count: tensor<f64>, %m: tensor<4xf32>, %v: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %one = loom.constant dense<1.0> : tensor<f64>
  %step = loom.add %count, %one : tensor<f64>
  %g = loom.exp %x : tensor<4xf32>
  %0:3 = loom.adamw_update %p, %g, %step, %m, %v {lr = 0.01 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
