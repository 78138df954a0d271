// Every verifier error of meshes, shardings and the attributes carrying them.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{mesh axis 'dp' is declared twice}}
loom.mesh @mesh = <dp = 2, dp = 4>

// -----

// expected-error @+1 {{mesh axis 'tp' has size 0; sizes must be positive}}
loom.mesh @mesh = <tp = 0>

// -----

// expected-error @+1 {{a mesh needs at least one axis}}
loom.mesh @mesh = <>

// -----

// expected-error @+1 {{mesh axis name 'tensor-parallel' is not an identifier}}
loom.mesh @mesh = <"tensor-parallel" = 2>

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{mesh axis 'tp' is used more than once in a sharding}}
loom.parameter @w : tensor<8x8xf32> sharding <@mesh, [{tp}, {tp}]>

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{mesh axis 'tp' is used more than once in a sharding}}
loom.parameter @w : tensor<8x8xf32> sharding <@mesh, [{tp}, {}], partial<sum> {tp}>

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{partial<sum> needs at least one mesh axis}}
loom.parameter @w : tensor<8x8xf32> sharding <@mesh, [{tp}, {}], partial<sum> {}>

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{expected 'sum' or 'max', got 'min'}}
loom.parameter @w : tensor<8x8xf32> sharding <@mesh, [{tp}, {}], partial<min> {dp}>

// -----

func.func @undefined_mesh(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.shard' op refers to mesh @nowhere, which is not defined}}
  %0 = loom.shard %x to <@nowhere, [{tp}]> : tensor<8xf32>
  return
}

// -----

loom.parameter @w : tensor<8xf32>
func.func @not_a_mesh(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.shard' op refers to @w as a mesh, but it is not a loom.mesh}}
  %0 = loom.shard %x to <@w, [{tp}]> : tensor<8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @rank_mismatch(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'loom.shard' op has an invalid sharding of the result: sharding has 1 dimension(s) but 'tensor<8x8xf32>' has rank 2}}
  %0 = loom.shard %x to <@mesh, [{tp}]> : tensor<8x8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @unknown_axis(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.shard' op has an invalid sharding of the result: unknown mesh axis 'pp'; mesh @mesh has axes dp, tp}}
  %0 = loom.shard %x to <@mesh, [{pp}]> : tensor<8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @unknown_partial_axis(%x: tensor<8xf32>) {
  // expected-error @+1 {{unknown mesh axis 'sp'; mesh @mesh has axes dp, tp}}
  %0 = loom.shard %x to <@mesh, [{tp}], partial<sum> {sp}> : tensor<8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @uneven_split(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'loom.shard' op has an invalid sharding of the result: dimension 0 of 'tensor<6x8xf32>' has size 6, which 4 shards do not divide evenly}}
  %0 = loom.shard %x to <@mesh, [{tp}, {}]> : tensor<6x8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @uneven_two_axes(%x: tensor<12xf32>) {
  // expected-error @+1 {{dimension 0 of 'tensor<12xf32>' has size 12, which 8 shards do not divide evenly}}
  %0 = loom.shard %x to <@mesh, [{dp, tp}]> : tensor<12xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @op_attribute(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'loom.exp' op has an invalid sharding of result #0: dimension 1 of 'tensor<8x6xf32>' has size 6, which 4 shards do not divide evenly}}
  %0 = loom.exp %x {loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}]>} : tensor<8x6xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
func.func @op_attribute_count(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'loom.split' op 'loom.sharding' gives 1 sharding(s) for 2 result(s)}}
  %0:2 = loom.split %x axis 0 {loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}]>}
      : tensor<8x8xf32> -> tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @op_attribute_kind(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.exp' op 'loom.sharding' must be a #loom.sharding or an array of them, got 42 : i64}}
  %0 = loom.exp %x {loom.sharding = 42} : tensor<8xf32>
  return
}

// -----

func.func @op_attribute_array(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.exp' op 'loom.sharding' array elements must be #loom.sharding, got "dp"}}
  %0 = loom.exp %x {loom.sharding = ["dp"]} : tensor<8xf32>
  return
}

// -----

func.func @unknown_attribute(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.exp' op has unknown loom attribute 'loom.shard'; known: 'loom.sharding', 'loom.sharding_origin', 'loom.resharding', 'loom.factor_sharding', 'loom.gradient_accumulation', 'loom.stage', 'loom.microbatch', 'loom.backward', 'loom.recomputed', 'loom.kept_gradient', 'loom.parameter_gradient', 'loom.gradient_bytes', 'loom.microbatches' (functions), 'loom.world_size', 'loom.pipeline_schedule' (modules), 'loom.ranks' (functions)}}
  %0 = loom.exp %x {loom.shard = 1} : tensor<8xf32>
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{'func.func' op has an invalid sharding of argument #0: dimension 0 of 'tensor<6xf32>' has size 6, which 4 shards do not divide evenly}}
func.func @argument(%x: tensor<6xf32> {loom.sharding = #loom.sharding<@mesh, [{tp}]>}) {
  return
}

// -----

loom.mesh @mesh = <dp = 2, tp = 4>
// expected-error @+1 {{'func.func' op has an invalid sharding of result #0: unknown mesh axis 'x'; mesh @mesh has axes dp, tp}}
func.func private @result() -> (tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{x}]>})

// -----

// expected-error @+1 {{'func.func' op 'loom.sharding' on argument #0 must be a #loom.sharding}}
func.func private @argument_kind(%x: tensor<8xf32> {loom.sharding = "tp"})

// -----

// expected-error @+1 {{mesh has more devices than fit in 64 bits}}
loom.mesh @mesh = <a = 4294967296, b = 4294967296>

// -----

loom.mesh @mesh = <tp = 2>
// expected-error @+1 {{'func.func' op has an invalid sharding of argument #0: dimension 0 of 'tensor<?xf32>' is dynamic; only static dimensions can be split}}
func.func private @dynamic(%x: tensor<?xf32> {loom.sharding = #loom.sharding<@mesh, [{tp}]>})

// -----

loom.mesh @mesh = <tp = 2>
// expected-error @+1 {{sharding axis name 'a b' is not an identifier}}
func.func private @bad_axis_name(%x: tensor<4xf32> {loom.sharding = #loom.sharding<@mesh, [{"a b"}]>})

// -----

loom.mesh @mesh = <tp = 2>
func.func @not_a_tensor() {
  // expected-error @+1 {{'arith.constant' op has an invalid sharding of result #0: a sharding describes a ranked tensor, not 'i32'}}
  %0 = arith.constant {loom.sharding = #loom.sharding<@mesh, []>} 1 : i32
  return
}

// -----

loom.mesh @mesh = <tp = 2>
// expected-error @+1 {{'?' must be the last entry of a dimension}}
loom.parameter @w trainable : tensor<4x4xf32> sharding <@mesh, [{tp}, {?, tp}]>

// -----

loom.mesh @mesh = <tp = 2>
// expected-error @+1 {{'loom.parameter' op has a sharding priority but no sharding}}
loom.parameter @w trainable : tensor<4x4xf32> priority 1

// -----

// The gradient-accumulation mark is a unit attribute on a loom.add.
func.func @accumulation_mark(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'loom.exp' op 'loom.gradient_accumulation' must be a unit attribute on a loom.add}}
  %0 = loom.exp %a {loom.gradient_accumulation} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// The gradient bytes are a non-negative integer on a function.
// expected-error @+1 {{'func.func' op 'loom.gradient_bytes' must be a non-negative integer on a function}}
func.func @gradient_bytes(%a: tensor<2xf32>) -> tensor<2xf32> attributes {loom.gradient_bytes = -4 : i64} {
  return %a : tensor<2xf32>
}

// -----

// A step's microbatch count left to loom-unroll-microbatches is a positive
// integer on a function.
// expected-error @+1 {{'func.func' op 'loom.microbatches' must be a positive integer on a function}}
func.func @pending_microbatches(%a: tensor<2xf32>) -> tensor<2xf32> attributes {loom.microbatches = 0 : i64} {
  return %a : tensor<2xf32>
}
