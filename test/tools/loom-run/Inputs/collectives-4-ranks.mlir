// Every collective and a send/recv ring on 4 ranks, each rank with its own
// input x (loom-run --input 'x=x{rank}.npy'); collectives.py is the numpy
// reference. Used by ranks.test and ranks-mpi.test.
module attributes {loom.world_size = 4 : i64} {
  func.func @main(%x: tensor<2x4xf32> {onnx.name = "x"}) -> (tensor<2x4xf32> {onnx.name = "sum"}, tensor<4x4xf32> {onnx.name = "gathered"}, tensor<1x4xf32> {onnx.name = "piece"}, tensor<2x4xf32> {onnx.name = "from_root"}, tensor<2x4xf32> {onnx.name = "swapped"}, tensor<2x4xf32> {onnx.name = "received"}, tensor<2x8xf32> {onnx.name = "gathered_hidden"}) {
    %0 = loom.all_reduce sum %x groups [[0, 1, 2, 3]] : tensor<2x4xf32>
    %1 = loom.all_gather %x axis 0 groups [[0, 1], [2, 3]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %2 = loom.reduce_scatter max %x axis 0 groups [[0, 2], [1, 3]] : tensor<2x4xf32> -> tensor<1x4xf32>
    %3 = loom.collective_broadcast %x root 1 groups [[0, 1, 2, 3]] : tensor<2x4xf32>
    %4 = loom.all_to_all %x groups [[0, 1], [2, 3]] : tensor<2x4xf32>
    loom.send %x to [[0, 1], [1, 2], [2, 3], [3, 0]] tag 7 : tensor<2x4xf32>
    %5 = loom.recv from [[0, 1], [1, 2], [2, 3], [3, 0]] tag 7 : tensor<2x4xf32>
    %6 = loom.all_gather %x axis 1 groups [[0, 1], [2, 3]] : tensor<2x4xf32> -> tensor<2x8xf32>
    return %0, %1, %2, %3, %4, %5, %6 : tensor<2x4xf32>, tensor<4x4xf32>, tensor<1x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x8xf32>
  }
}
