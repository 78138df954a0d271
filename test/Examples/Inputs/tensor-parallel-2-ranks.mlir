// The training step of data-parallel-1-rank.mlir, hand-written for 2 ranks
// of tensor parallelism, Megatron-style (as loom-partition will write it):
// both ranks see the whole batch of 4 rows; the first linear layer is split
// by its output rows (rank r holds rows [4r, 4r+4) of @w1 and of @b1: h's
// columns [4r, 4r+4)), the second by its input columns (rank r holds
// columns [4r, 4r+4) of @w2), so each rank's h @ w2^T is a partial sum that
// one forward all_reduce completes; @b2 is replicated. The input needs no
// gradient, so the backward needs no all_reduce: each rank's weight
// gradients are its own shards' (dW2 = dy^T h: its columns of w2; dW1 =
// dh1^T x: its rows of w1), and its optimizer state is sharded alike. The
// parameters keep their global types and shardings; loom.param and
// loom.assign use each rank's shard type.
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]> = dense<[[0.0628651082, -0.0660524294, 0.320211321, 0.0524500571, -0.267834693, 0.180797532, 6.520000e-01, 0.473540485], [-0.351867616, -0.632710754, -0.311637223, 0.0206629895, -1.1625154, -0.109395832, -0.622955501, -0.36613369], [-0.272129506, -0.158150077, 0.205815271, 0.521256685, -0.0642673299, 0.683231711, -0.332597345, 0.175755039], [0.451735079, 0.0470061488, -0.37174964, -0.460862696, -0.228862911, 0.110097565, -0.504809082, -0.104587786], [-0.0796125084, 0.270422786, 0.107329562, 0.177686349, -0.32691431, -0.064806819, 0.391987741, 0.746715545], [-0.629532754, 0.756961882, 0.672937691, 0.390655696, 0.132227808, -0.156961411, 0.729010344, 0.980129182], [0.900817453, 0.657551885, 0.17869021, -0.604159296, -0.00222706655, 0.328237474, -0.644180715, 0.197561026], [0.214931846, 0.348021358, -0.592058957, -0.330851287, -0.218217626, -5.849010e-01, 0.869683921, -0.247955367]]> : tensor<8x8xf32>
  loom.parameter @b1 trainable : tensor<8xf32> sharding <@mesh, [{tp}]> = dense<[0.032896962, -0.0258572549, 0.158347294, 0.132036105, 0.0633352622, -0.220350981, 0.00520289736, 0.0683686212]> : tensor<8xf32>
  loom.parameter @w2 trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> = dense<[[0.501980782, -0.308953524, 0.911005675, -0.660215497, -0.330764025, 4.675250e-01, 0.0245273076, 1.00119627], [0.0942595973, -0.316597044, -0.188781753, -0.545573056, -0.638840079, 0.315205753, 0.290582895, 0.647279382], [-0.377302885, 0.844553709, -0.143693849, 0.787204146, -0.216392919, -0.367741644, 0.124892689, 0.515726566], [0.0805047899, -0.292764425, -0.670609832, -0.700760126, 0.251341432, 0.494856507, -0.0821472927, -0.53718245]]> : tensor<4x8xf32>
  loom.parameter @b2 trainable : tensor<4xf32> = dense<[0.0873042121, -0.12803939, -0.0713068098, 0.062101785]> : tensor<4xf32>
  loom.parameter @optimizer.step : tensor<f64> = dense<0.000000e+00> : tensor<f64>
  loom.parameter @optimizer.w1.exp_avg : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]> = dense<0.000000e+00> : tensor<8x8xf32>
  loom.parameter @optimizer.w1.exp_avg_sq : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]> = dense<0.000000e+00> : tensor<8x8xf32>
  loom.parameter @optimizer.b1.exp_avg : tensor<8xf32> sharding <@mesh, [{tp}]> = dense<0.000000e+00> : tensor<8xf32>
  loom.parameter @optimizer.b1.exp_avg_sq : tensor<8xf32> sharding <@mesh, [{tp}]> = dense<0.000000e+00> : tensor<8xf32>
  loom.parameter @optimizer.w2.exp_avg : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> = dense<0.000000e+00> : tensor<4x8xf32>
  loom.parameter @optimizer.w2.exp_avg_sq : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> = dense<0.000000e+00> : tensor<4x8xf32>
  loom.parameter @optimizer.b2.exp_avg : tensor<4xf32> = dense<0.000000e+00> : tensor<4xf32>
  loom.parameter @optimizer.b2.exp_avg_sq : tensor<4xf32> = dense<0.000000e+00> : tensor<4xf32>
  func.func @train_step(%x: tensor<4x8xf32> {onnx.name = "x"}, %labels: tensor<4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) attributes {loom.ranks = array<i64: 0, 1>} {
    %count = loom.param @optimizer.step : tensor<f64>
    %one = loom.constant dense<1.000000e+00> : tensor<f64>
    %step = loom.add %count, %one : tensor<f64>
    %w1 = loom.param @w1 : tensor<4x8xf32>
    %b1 = loom.param @b1 : tensor<4xf32>
    %w2 = loom.param @w2 : tensor<4x4xf32>
    %b2 = loom.param @b2 : tensor<4xf32>
    // Forward: this rank's 4 columns of h, then a partial sum of the logits.
    %h0 = loom.matmul %x, %w1 transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %h1 = loom.bias_add %h0, %b1 : tensor<4x4xf32>, tensor<4xf32>
    %h = loom.relu %h1 : tensor<4x4xf32>
    %y_partial = loom.matmul %h, %w2 transpose_rhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %y0 = loom.all_reduce sum %y_partial groups [[0, 1]] : tensor<4x4xf32>
    %y = loom.bias_add %y0, %b2 : tensor<4x4xf32>, tensor<4xf32>
    %loss = loom.cross_entropy %y, %labels : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
    // Backward of the mean loss (seed 1/4: 4 rows), the same dy on both.
    %seed = loom.constant dense<2.500000e-01> : tensor<f32>
    %dy = loom.cross_entropy_grad %y, %labels, %seed : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
    %db2_0 = loom.reduce_sum %dy [0] keepdims : tensor<4x4xf32> -> tensor<1x4xf32>
    %db2 = loom.reshape %db2_0 : tensor<1x4xf32> -> tensor<4xf32>
    %dh = loom.matmul %dy, %w2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %dw2 = loom.matmul %dy, %h transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %zero = loom.constant dense<0.000000e+00> : tensor<f32>
    %active = loom.compare gt, %h1, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    %dh1 = loom.select %active, %dh, %zero : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %db1_0 = loom.reduce_sum %dh1 [0] keepdims : tensor<4x4xf32> -> tensor<1x4xf32>
    %db1 = loom.reshape %db1_0 : tensor<1x4xf32> -> tensor<4xf32>
    %dw1 = loom.matmul %dh1, %x transpose_lhs : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    // AdamW on each rank's shards (and on the replicated @b2, the same on both).
    %w1_m = loom.param @optimizer.w1.exp_avg : tensor<4x8xf32>
    %w1_v = loom.param @optimizer.w1.exp_avg_sq : tensor<4x8xf32>
    %w1_new, %w1_state:2 = loom.adamw_update %w1, %dw1, %step, %w1_m, %w1_v {lr = 1.000000e-02 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f64>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
    loom.assign @w1, %w1_new : tensor<4x8xf32>
    loom.assign @optimizer.w1.exp_avg, %w1_state#0 : tensor<4x8xf32>
    loom.assign @optimizer.w1.exp_avg_sq, %w1_state#1 : tensor<4x8xf32>
    %b1_m = loom.param @optimizer.b1.exp_avg : tensor<4xf32>
    %b1_v = loom.param @optimizer.b1.exp_avg_sq : tensor<4xf32>
    %b1_new, %b1_state:2 = loom.adamw_update %b1, %db1, %step, %b1_m, %b1_v {lr = 1.000000e-02 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    loom.assign @b1, %b1_new : tensor<4xf32>
    loom.assign @optimizer.b1.exp_avg, %b1_state#0 : tensor<4xf32>
    loom.assign @optimizer.b1.exp_avg_sq, %b1_state#1 : tensor<4xf32>
    %w2_m = loom.param @optimizer.w2.exp_avg : tensor<4x4xf32>
    %w2_v = loom.param @optimizer.w2.exp_avg_sq : tensor<4x4xf32>
    %w2_new, %w2_state:2 = loom.adamw_update %w2, %dw2, %step, %w2_m, %w2_v {lr = 1.000000e-02 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f64>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
    loom.assign @w2, %w2_new : tensor<4x4xf32>
    loom.assign @optimizer.w2.exp_avg, %w2_state#0 : tensor<4x4xf32>
    loom.assign @optimizer.w2.exp_avg_sq, %w2_state#1 : tensor<4x4xf32>
    %b2_m = loom.param @optimizer.b2.exp_avg : tensor<4xf32>
    %b2_v = loom.param @optimizer.b2.exp_avg_sq : tensor<4xf32>
    %b2_new, %b2_state:2 = loom.adamw_update %b2, %db2, %step, %b2_m, %b2_v {lr = 1.000000e-02 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    loom.assign @b2, %b2_new : tensor<4xf32>
    loom.assign @optimizer.b2.exp_avg, %b2_state#0 : tensor<4xf32>
    loom.assign @optimizer.b2.exp_avg_sq, %b2_state#1 : tensor<4xf32>
    loom.assign @optimizer.step, %step : tensor<f64>
    return %loss : tensor<f32>
  }
}
