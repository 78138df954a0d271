// A tiny MLP's training step on one rank (x: 4 rows of 8 features, 4
// classes; AdamW, lr 0.01), the reference for data-parallel-2-ranks.mlir.
// Generated from the model below (@forward) with
//   loom-opt --canonicalize --loom-attach-loss --loom-autodiff=function=forward_loss \
//     "--loom-build-train-step=function=forward_loss_grad optimizer=adamw lr=0.01"
// keeping @train_step and the parameters.
//
//   %h = relu(matmul(%x, @w1, transpose_rhs) + @b1)
//   %y = matmul(%h, @w2, transpose_rhs) + @b2    // logits, 4 classes
module {
  loom.parameter @w1 trainable : tensor<8x8xf32> = dense<[[0.0628651082, -0.0660524294, 0.320211321, 0.0524500571, -0.267834693, 0.180797532, 6.520000e-01, 0.473540485], [-0.351867616, -0.632710754, -0.311637223, 0.0206629895, -1.1625154, -0.109395832, -0.622955501, -0.36613369], [-0.272129506, -0.158150077, 0.205815271, 0.521256685, -0.0642673299, 0.683231711, -0.332597345, 0.175755039], [0.451735079, 0.0470061488, -0.37174964, -0.460862696, -0.228862911, 0.110097565, -0.504809082, -0.104587786], [-0.0796125084, 0.270422786, 0.107329562, 0.177686349, -0.32691431, -0.064806819, 0.391987741, 0.746715545], [-0.629532754, 0.756961882, 0.672937691, 0.390655696, 0.132227808, -0.156961411, 0.729010344, 0.980129182], [0.900817453, 0.657551885, 0.17869021, -0.604159296, -0.00222706655, 0.328237474, -0.644180715, 0.197561026], [0.214931846, 0.348021358, -0.592058957, -0.330851287, -0.218217626, -5.849010e-01, 0.869683921, -0.247955367]]> : tensor<8x8xf32>
  loom.parameter @b1 trainable : tensor<8xf32> = dense<[0.032896962, -0.0258572549, 0.158347294, 0.132036105, 0.0633352622, -0.220350981, 0.00520289736, 0.0683686212]> : tensor<8xf32>
  loom.parameter @w2 trainable : tensor<4x8xf32> = dense<[[0.501980782, -0.308953524, 0.911005675, -0.660215497, -0.330764025, 4.675250e-01, 0.0245273076, 1.00119627], [0.0942595973, -0.316597044, -0.188781753, -0.545573056, -0.638840079, 0.315205753, 0.290582895, 0.647279382], [-0.377302885, 0.844553709, -0.143693849, 0.787204146, -0.216392919, -0.367741644, 0.124892689, 0.515726566], [0.0805047899, -0.292764425, -0.670609832, -0.700760126, 0.251341432, 0.494856507, -0.0821472927, -0.53718245]]> : tensor<4x8xf32>
  loom.parameter @b2 trainable : tensor<4xf32> = dense<[0.0873042121, -0.12803939, -0.0713068098, 0.062101785]> : tensor<4xf32>
  loom.parameter @optimizer.step : tensor<f64> = dense<0.000000e+00> : tensor<f64>
  loom.parameter @optimizer.w1.exp_avg : tensor<8x8xf32> = dense<0.000000e+00> : tensor<8x8xf32>
  loom.parameter @optimizer.w1.exp_avg_sq : tensor<8x8xf32> = dense<0.000000e+00> : tensor<8x8xf32>
  loom.parameter @optimizer.b1.exp_avg : tensor<8xf32> = dense<0.000000e+00> : tensor<8xf32>
  loom.parameter @optimizer.b1.exp_avg_sq : tensor<8xf32> = dense<0.000000e+00> : tensor<8xf32>
  loom.parameter @optimizer.w2.exp_avg : tensor<4x8xf32> = dense<0.000000e+00> : tensor<4x8xf32>
  loom.parameter @optimizer.w2.exp_avg_sq : tensor<4x8xf32> = dense<0.000000e+00> : tensor<4x8xf32>
  loom.parameter @optimizer.b2.exp_avg : tensor<4xf32> = dense<0.000000e+00> : tensor<4xf32>
  loom.parameter @optimizer.b2.exp_avg_sq : tensor<4xf32> = dense<0.000000e+00> : tensor<4xf32>
  func.func @train_step(%arg0: tensor<4x8xf32> {onnx.name = "x"}, %arg1: tensor<4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %0 = loom.param @optimizer.step : tensor<f64>
    %1 = loom.constant dense<1.000000e+00> : tensor<f64>
    %2 = loom.add %0, %1 : tensor<f64>
    %3 = loom.param @w1 : tensor<8x8xf32>
    %4 = loom.param @b1 : tensor<8xf32>
    %5 = loom.param @w2 : tensor<4x8xf32>
    %6 = loom.param @b2 : tensor<4xf32>
    %7 = loom.matmul %arg0, %3 transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %8 = loom.bias_add %7, %4 : tensor<4x8xf32>, tensor<8xf32>
    %9 = loom.relu %8 : tensor<4x8xf32>
    %10 = loom.matmul %9, %5 transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %11 = loom.bias_add %10, %6 : tensor<4x4xf32>, tensor<4xf32>
    %12 = loom.cross_entropy %11, %arg1 : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
    %13 = loom.constant dense<1.000000e+00> : tensor<f32>
    %14 = loom.constant dense<2.500000e-01> : tensor<f32>
    %15 = loom.mul %13, %14 : tensor<f32>
    %16 = loom.cross_entropy_grad %11, %arg1, %15 : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
    %17 = loom.reduce_sum %16 [0] keepdims : tensor<4x4xf32> -> tensor<1x4xf32>
    %18 = loom.reshape %17 : tensor<1x4xf32> -> tensor<4xf32>
    %19 = loom.matmul %16, %5 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %20 = loom.matmul %16, %9 transpose_lhs : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %21 = loom.constant dense<0.000000e+00> : tensor<f32>
    %22 = loom.compare gt, %8, %21 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
    %23 = loom.constant dense<0.000000e+00> : tensor<f32>
    %24 = loom.select %22, %19, %23 : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %25 = loom.reduce_sum %24 [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
    %26 = loom.reshape %25 : tensor<1x8xf32> -> tensor<8xf32>
    %27 = loom.matmul %24, %arg0 transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %28 = loom.param @optimizer.w1.exp_avg : tensor<8x8xf32>
    %29 = loom.param @optimizer.w1.exp_avg_sq : tensor<8x8xf32>
    %30 = loom.param @w1 : tensor<8x8xf32>
    %new_param, %new_states:2 = loom.adamw_update %30, %27, %2, %28, %29 {lr = 1.000000e-02 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<f64>, tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
    loom.assign @w1, %new_param : tensor<8x8xf32>
    loom.assign @optimizer.w1.exp_avg, %new_states#0 : tensor<8x8xf32>
    loom.assign @optimizer.w1.exp_avg_sq, %new_states#1 : tensor<8x8xf32>
    %31 = loom.param @optimizer.b1.exp_avg : tensor<8xf32>
    %32 = loom.param @optimizer.b1.exp_avg_sq : tensor<8xf32>
    %33 = loom.param @b1 : tensor<8xf32>
    %new_param_0, %new_states_1:2 = loom.adamw_update %33, %26, %2, %31, %32 {lr = 1.000000e-02 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    loom.assign @b1, %new_param_0 : tensor<8xf32>
    loom.assign @optimizer.b1.exp_avg, %new_states_1#0 : tensor<8xf32>
    loom.assign @optimizer.b1.exp_avg_sq, %new_states_1#1 : tensor<8xf32>
    %34 = loom.param @optimizer.w2.exp_avg : tensor<4x8xf32>
    %35 = loom.param @optimizer.w2.exp_avg_sq : tensor<4x8xf32>
    %36 = loom.param @w2 : tensor<4x8xf32>
    %new_param_2, %new_states_3:2 = loom.adamw_update %36, %20, %2, %34, %35 {lr = 1.000000e-02 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f64>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
    loom.assign @w2, %new_param_2 : tensor<4x8xf32>
    loom.assign @optimizer.w2.exp_avg, %new_states_3#0 : tensor<4x8xf32>
    loom.assign @optimizer.w2.exp_avg_sq, %new_states_3#1 : tensor<4x8xf32>
    %37 = loom.param @optimizer.b2.exp_avg : tensor<4xf32>
    %38 = loom.param @optimizer.b2.exp_avg_sq : tensor<4xf32>
    %39 = loom.param @b2 : tensor<4xf32>
    %new_param_4, %new_states_5:2 = loom.adamw_update %39, %18, %2, %37, %38 {lr = 1.000000e-02 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    loom.assign @b2, %new_param_4 : tensor<4xf32>
    loom.assign @optimizer.b2.exp_avg, %new_states_5#0 : tensor<4xf32>
    loom.assign @optimizer.b2.exp_avg_sq, %new_states_5#1 : tensor<4xf32>
    loom.assign @optimizer.step, %2 : tensor<f64>
    return %12 : tensor<f32>
  }
}
