// RUN: loom-opt --loom-cache-parameter-casts --split-input-file --verify-diagnostics %s | FileCheck %s

// A trained weight that a bf16 GEMM reads: the GEMM reads a bf16 copy, and
// the function that assigns the weight assigns the copy the cast of the
// new value right after. The f32 read stays for the update.
// CHECK:       loom.parameter @w trainable : tensor<4x8xf32> = dense<5.000000e-01> : tensor<4x8xf32>
// CHECK-NEXT:  loom.parameter @w.bf16 : tensor<4x8xbf16> = #loom.cast_of<@w>
// CHECK-LABEL: func.func @step
// CHECK:         %[[W:.*]] = loom.param @w : tensor<4x8xf32>
// CHECK:         %[[C:.*]] = loom.param @w.bf16 : tensor<4x8xbf16>
// CHECK-NOT:     loom.cast %[[W]]
// CHECK:         %[[Y:.*]] = loom.matmul %arg0, %[[C]]
// CHECK:         %[[NEW:.*]] = loom.sub %[[W]], %arg1 : tensor<4x8xf32>
// CHECK-NEXT:    loom.assign @w, %[[NEW]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[NARROW:.*]] = loom.cast %[[NEW]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    loom.assign @w.bf16, %[[NARROW]] : tensor<4x8xbf16>
// CHECK-NEXT:    return %[[Y]]
loom.parameter @w trainable : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @step(%x: tensor<2x4xbf16>, %g: tensor<4x8xf32>) -> tensor<2x8xbf16> {
  %w = loom.param @w : tensor<4x8xf32>
  %wl = loom.cast %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %y = loom.matmul %x, %wl : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
  %w1 = loom.sub %w, %g : tensor<4x8xf32>
  loom.assign @w, %w1 : tensor<4x8xf32>
  return %y : tensor<2x8xbf16>
}

// -----

// Every cast of one parameter, in any function, reads the same copy; every
// function that assigns the parameter assigns the copy too, also when it
// never reads the copy itself. A weight nothing assigns (inference) gets a
// copy that nothing writes, and its f32 read goes away with its last cast.
// CHECK:       loom.parameter @w trainable : tensor<4x8xf32>
// CHECK-NEXT:  loom.parameter @w.bf16 : tensor<4x8xbf16> = #loom.cast_of<@w>
// CHECK:       loom.parameter @frozen : tensor<8x8xf64>
// CHECK-NEXT:  loom.parameter @frozen.bf16 : tensor<8x8xbf16> = #loom.cast_of<@frozen>
// CHECK-LABEL: func.func @forward
// CHECK-NOT:     loom.param @w :
// CHECK-NOT:     loom.param @frozen :
// CHECK:         %[[A:.*]] = loom.param @w.bf16 : tensor<4x8xbf16>
// CHECK:         %[[B:.*]] = loom.param @w.bf16 : tensor<4x8xbf16>
// CHECK:         %[[F:.*]] = loom.param @frozen.bf16 : tensor<8x8xbf16>
// CHECK:         loom.matmul %arg0, %[[A]]
// CHECK:         loom.matmul %arg0, %[[B]]
// CHECK-NOT:     loom.assign
// CHECK-LABEL: func.func @update
// CHECK:         loom.assign @w, %arg0 : tensor<4x8xf32>
// CHECK-NEXT:    %[[N:.*]] = loom.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    loom.assign @w.bf16, %[[N]] : tensor<4x8xbf16>
loom.parameter @w trainable : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
loom.parameter @frozen : tensor<8x8xf64> = dense<0.25> : tensor<8x8xf64>
func.func @forward(%x: tensor<2x4xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8x8xbf16>) {
  %w = loom.param @w : tensor<4x8xf32>
  %a = loom.cast %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %b = loom.cast %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %f = loom.param @frozen : tensor<8x8xf64>
  %fl = loom.cast %f : tensor<8x8xf64> -> tensor<8x8xbf16>
  %y = loom.matmul %x, %a : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
  %z = loom.matmul %x, %b : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
  return %y, %z, %fl : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8x8xbf16>
}
func.func @update(%new: tensor<4x8xf32>) {
  loom.assign @w, %new : tensor<4x8xf32>
  return
}

// -----

// The copy takes a free name, keeps the parameter's sharding, and names
// its source also when the parameter is shapes-only.
// CHECK:       loom.parameter @w.bf16 : tensor<4x8xf32>
// CHECK:       loom.parameter @w trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>{{$}}
// CHECK-NEXT:  loom.parameter @[[COPY:.*]] : tensor<4x8xbf16> sharding <@mesh, [{}, {tp}]> = #loom.cast_of<@w>{{$}}
// CHECK-LABEL: func.func @shapes_only
// CHECK:         loom.param @[[COPY]] : tensor<4x8xbf16>
loom.mesh @mesh = <tp = 2>
loom.parameter @w.bf16 : tensor<4x8xf32>
loom.parameter @w trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
func.func @shapes_only(%x: tensor<2x4xbf16>) -> tensor<2x8xbf16> {
  %w = loom.param @w : tensor<4x8xf32>
  %wl = loom.cast %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %y = loom.matmul %x, %wl : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

// Left alone: a cast to another type than bf16, a widening cast of a bf16
// parameter, and a cast of a computed value.
// CHECK-NOT:   .bf16 :
// CHECK-LABEL: func.func @not_parameter_casts
// CHECK:         loom.cast %{{.*}} : tensor<4xf32> -> tensor<4xf16>
// CHECK:         loom.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf32>
// CHECK:         loom.cast %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NOT:     loom.assign
loom.parameter @a trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
loom.parameter @b : tensor<4xbf16> = dense<1.0> : tensor<4xbf16>
func.func @not_parameter_casts(%x: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xf32>, tensor<4xbf16>) {
  %a = loom.param @a : tensor<4xf32>
  %0 = loom.cast %a : tensor<4xf32> -> tensor<4xf16>
  %b = loom.param @b : tensor<4xbf16>
  %1 = loom.cast %b : tensor<4xbf16> -> tensor<4xf32>
  %2 = loom.cast %x : tensor<4xf32> -> tensor<4xbf16>
  return %0, %1, %2 : tensor<4xf16>, tensor<4xf32>, tensor<4xbf16>
}

// -----

// In a partitioned function (each rank's shard type: columns split over tp)
// the copy keeps the parameter's global type and sharding, while its read,
// its store and the cast that feeds it keep the shard type.
// CHECK:       loom.parameter @w trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> = dense<1.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:  loom.parameter @w.bf16 : tensor<4x8xbf16> sharding <@mesh, [{}, {tp}]> = #loom.cast_of<@w>
// CHECK-LABEL: func.func @partitioned
// CHECK:         loom.param @w.bf16 : tensor<4x4xbf16>
// CHECK:         loom.assign @w, %[[NEW:.*]] : tensor<4x4xf32>
// CHECK-NEXT:    %[[NARROW:.*]] = loom.cast %[[NEW]] : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT:    loom.assign @w.bf16, %[[NARROW]] : tensor<4x4xbf16>
loom.mesh @mesh = <tp = 2>
loom.parameter @w trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> = dense<1.0> : tensor<4x8xf32>
func.func @partitioned(%x: tensor<2x4xbf16>, %new: tensor<4x4xf32>) -> tensor<2x4xbf16> {
  %w = loom.param @w : tensor<4x4xf32>
  %wl = loom.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y = loom.matmul %x, %wl : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  loom.assign @w, %new : tensor<4x4xf32>
  return %y : tensor<2x4xbf16>
}
