// Every verifier error of parameters (`loom.parameter`, `loom.param`,
// `loom.assign`, `loom.gradient_of`) and of `loom.constant`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'loom.parameter' op is trainable but has element type 'i64'; only floating-point parameters can be trained}}
loom.parameter @ids trainable : tensor<4xi64>

// -----

// expected-error @+1 {{'loom.parameter' op has initial value of type 'tensor<3xf32>' but is declared as 'tensor<4xf32>'}}
loom.parameter @w : tensor<4xf32> = dense<0.0> : tensor<3xf32>

// -----

// expected-error @+1 {{'loom.parameter' op has external data of 12 bytes but 'tensor<4xf32>' takes 4 x 4 bytes}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = 0, length = 12>

// -----

// One byte per i1 element, as in ONNX (not bit-packed).
// expected-error @+1 {{'loom.parameter' op has external data of 1 bytes but 'tensor<4xi1>' takes 4 x 1 bytes}}
loom.parameter @mask : tensor<4xi1> = #loom.external_data<"m.bin", offset = 8, length = 1>

// -----

// expected-error @+1 {{external data offset and length must be non-negative, got offset -1 and length 16}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = -1, length = 16>

// -----

// expected-error @+1 {{external data needs a file path}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"", offset = 0, length = 16>

// -----

// expected-error @+1 {{external data ends past 2^63 bytes}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = 9223372036854775800, length = 16>

// -----

loom.parameter @w trainable : tensor<4xf32>
// expected-error @+1 {{'loom.parameter' op is trainable but its value is a cast of another parameter}}
loom.parameter @c trainable : tensor<4xbf16> = #loom.cast_of<@w>

// -----

loom.parameter @w : tensor<4xf64>
// expected-error @+1 {{'loom.parameter' op is a cast of another parameter, which needs a bf16 element type, not 'f32'}}
loom.parameter @c : tensor<4xf32> = #loom.cast_of<@w>

// -----

// expected-error @+1 {{'loom.parameter' op is a cast of @missing, which is not a loom.parameter}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@missing>

// -----

loom.parameter @w : tensor<3xf32>
// expected-error @+1 {{'loom.parameter' op is a cast of @w of type 'tensor<3xf32>', which has another shape}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>

// -----

loom.parameter @w : tensor<4xi32>
// expected-error @+1 {{'loom.parameter' op is a cast of @w of type 'tensor<4xi32>'; only f32 and f64 parameters have bf16 copies}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>

// -----

// A copy is bf16, so a copy of a copy has the wrong source type.
loom.parameter @w : tensor<4xf32>
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>
// expected-error @+1 {{'loom.parameter' op is a cast of @c of type 'tensor<4xbf16>'; only f32 and f64 parameters have bf16 copies}}
loom.parameter @d : tensor<4xbf16> = #loom.cast_of<@c>

// -----

loom.mesh @mesh = <tp = 4>
// expected-error @+1 {{'loom.parameter' op has an invalid sharding of the parameter: dimension 0 of 'tensor<6xf32>' has size 6, which 4 shards do not divide evenly}}
loom.parameter @w : tensor<6xf32> sharding <@mesh, [{tp}]>

// -----

func.func @undefined_parameter() {
  // expected-error @+1 {{'loom.param' op reads @missing, which is not defined}}
  %0 = loom.param @missing : tensor<4xf32>
  return
}

// -----

loom.mesh @mesh = <tp = 4>
func.func @not_a_parameter() {
  // expected-error @+1 {{'loom.param' op reads @mesh, which is not a loom.parameter}}
  %0 = loom.param @mesh : tensor<4xf32>
  return
}

// -----

loom.parameter @w : tensor<4xf32>
func.func @parameter_type_mismatch() {
  // expected-error @+1 {{'loom.param' op has type 'tensor<8xf32>' but parameter @w is 'tensor<4xf32>'}}
  %0 = loom.param @w : tensor<8xf32>
  return
}

// -----

// A sharded parameter is read whole, or (in a partitioned function) as this
// rank's shard: rows split 4 ways over {dp, tp}, columns not at all.
loom.mesh @mesh = <dp = 2, tp = 2>
loom.parameter @w : tensor<8x6xf32> sharding <@mesh, [{dp, tp}, {}]>
func.func @shard_type_mismatch() {
  %whole = loom.param @w : tensor<8x6xf32>
  %shard = loom.param @w : tensor<2x6xf32>
  // expected-error @+1 {{'loom.param' op has type 'tensor<4x6xf32>' but parameter @w is 'tensor<8x6xf32>' (a shard of it 'tensor<2x6xf32>')}}
  %0 = loom.param @w : tensor<4x6xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{'loom.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "loom.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.gradient_of' on result #0 must name a loom.parameter}}
func.func @gradient_of_not_symbol(%x: tensor<4xf32>) -> (tensor<4xf32> {loom.gradient_of = 3 : i64}) {
  return %x : tensor<4xf32>
}

// -----

loom.parameter @w trainable : tensor<4xf32>
func.func @assign_twice(%x: tensor<4xf32>) {
  loom.assign @w, %x : tensor<4xf32>
  // expected-error @+1 {{assigns @w a second time in the same block}}
  loom.assign @w, %x : tensor<4xf32>
  return
}

// -----

loom.parameter @w trainable : tensor<4xf32>
func.func @assign_wrong_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{assigns a 'tensor<2xf32>' to parameter @w of type 'tensor<4xf32>'}}
  loom.assign @w, %x : tensor<2xf32>
  return
}

// -----

loom.mesh @mesh = <tp = 2>
loom.parameter @w trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
func.func @assign_shard(%shard: tensor<4x4xf32>) {
  loom.assign @w, %shard : tensor<4x4xf32>
  return
}
func.func @assign_whole(%whole: tensor<4x8xf32>) {
  loom.assign @w, %whole : tensor<4x8xf32>
  return
}
func.func @assign_rows(%rows: tensor<2x8xf32>) {
  // expected-error @+1 {{assigns a 'tensor<2x8xf32>' to parameter @w of type 'tensor<4x8xf32>' (a shard of it 'tensor<4x4xf32>')}}
  loom.assign @w, %rows : tensor<2x8xf32>
  return
}

// -----

func.func @assign_unknown(%x: tensor<2xf32>) {
  // expected-error @+1 {{assigns @nope, which is not a loom.parameter}}
  loom.assign @nope, %x : tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.batch_offsets' on argument #0 must be a non-empty array<i64> of batch row offsets >= 0}}
func.func @batch_offsets_negative(%x: tensor<2x4xf32> {loom.batch_offsets = array<i64: 0, -2>}) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.batch_offsets' on argument #0 must be a non-empty array<i64> of batch row offsets >= 0}}
func.func @batch_offsets_not_array(%x: tensor<2x4xf32> {loom.batch_offsets = 2 : i64}) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
