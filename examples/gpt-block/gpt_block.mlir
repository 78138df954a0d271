// A one-block GPT (embedding, causal attention, GELU MLP, LayerNorm, LM head,
// cross-entropy) in the loom dialect: batch 2, sequence 16, width 64, 4 heads,
// vocabulary 256. The weights are annotated the Megatron way on a dp x tp
// mesh (QKV and MLP-up split by columns, projections by rows) for the
// sharding propagation that later stages run.
//
// Run it with scripts/example.sh: Loom verifies it, folds what exporters
// leave to runtime (the causal mask below), and prints the factor rule of
// every op, which is what sharding propagation reads.

loom.mesh @mesh = <dp = 2, tp = 2>

loom.parameter @wte trainable : tensor<256x64xf32> sharding <@mesh, [{tp}, {}]>
loom.parameter @wpe trainable : tensor<16x64xf32>
loom.parameter @ln1.weight trainable : tensor<64xf32>
loom.parameter @ln1.bias trainable : tensor<64xf32>
loom.parameter @attn.qkv.weight trainable : tensor<64x192xf32> sharding <@mesh, [{}, {tp}]>
loom.parameter @attn.qkv.bias trainable : tensor<192xf32> sharding <@mesh, [{tp}]>
loom.parameter @attn.proj.weight trainable : tensor<64x64xf32> sharding <@mesh, [{tp}, {}]>
loom.parameter @attn.proj.bias trainable : tensor<64xf32>
loom.parameter @ln2.weight trainable : tensor<64xf32>
loom.parameter @ln2.bias trainable : tensor<64xf32>
loom.parameter @mlp.up.weight trainable : tensor<64x256xf32> sharding <@mesh, [{}, {tp}]>
loom.parameter @mlp.up.bias trainable : tensor<256xf32> sharding <@mesh, [{tp}]>
loom.parameter @mlp.down.weight trainable : tensor<256x64xf32> sharding <@mesh, [{tp}, {}]>
loom.parameter @mlp.down.bias trainable : tensor<64xf32>
loom.parameter @lnf.weight trainable : tensor<64xf32>
loom.parameter @lnf.bias trainable : tensor<64xf32>

func.func @train_loss(%ids: tensor<2x16xi64> {loom.sharding = #loom.sharding<@mesh, [{dp}, {}]>},
                      %labels: tensor<2x16xi64> {loom.sharding = #loom.sharding<@mesh, [{dp}, {}]>})
    -> tensor<f32> {
  // Token and position embeddings.
  %wte = loom.param @wte : tensor<256x64xf32>
  %wpe = loom.param @wpe : tensor<16x64xf32>
  %tok = loom.gather %wte[%ids] : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  %x0 = loom.add %tok, %wpe : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>

  // Attention block.
  %g1 = loom.param @ln1.weight : tensor<64xf32>
  %b1 = loom.param @ln1.bias : tensor<64xf32>
  %h1 = loom.layer_norm %x0, %g1, %b1 axis 2 : tensor<2x16x64xf32>, tensor<64xf32>
  %wqkv = loom.param @attn.qkv.weight : tensor<64x192xf32>
  %bqkv = loom.param @attn.qkv.bias : tensor<192xf32>
  %qkv0 = loom.matmul %h1, %wqkv : (tensor<2x16x64xf32>, tensor<64x192xf32>) -> tensor<2x16x192xf32>
  %qkv = loom.bias_add %qkv0, %bqkv : tensor<2x16x192xf32>, tensor<192xf32>
  %q0, %k0, %v0 = loom.split %qkv axis 2 : tensor<2x16x192xf32>
      -> tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>

  %q1 = loom.reshape %q0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %k1 = loom.reshape %k0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %v1 = loom.reshape %v0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %q = loom.transpose %q1 [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  %k = loom.transpose %k1 [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  %v = loom.transpose %v1 [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
  %s0 = loom.matmul %q, %k transpose_rhs : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %scale = loom.constant dense<0.25> : tensor<f32>
  %s1 = loom.mul %s0, %scale : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  // The causal mask as exporters build it (row index >= column index); it
  // folds to a constant.
  %rows = loom.constant dense<[[0], [1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13], [14], [15]]> : tensor<16x1xi64>
  %cols = loom.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
  %causal = loom.compare ge, %rows, %cols : (tensor<16x1xi64>, tensor<16xi64>) -> tensor<16x16xi1>
  %neg_inf = loom.constant dense<0xFF800000> : tensor<f32>
  %s2 = loom.select %causal, %s1, %neg_inf : (tensor<16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p = loom.softmax %s2 axis 3 : tensor<2x4x16x16xf32>
  %o0 = loom.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %o1 = loom.transpose %o0 [0, 2, 1, 3] : tensor<2x4x16x16xf32> -> tensor<2x16x4x16xf32>
  %o = loom.reshape %o1 : tensor<2x16x4x16xf32> -> tensor<2x16x64xf32>
  %wo = loom.param @attn.proj.weight : tensor<64x64xf32>
  %bo = loom.param @attn.proj.bias : tensor<64xf32>
  %a0 = loom.matmul %o, %wo : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %a = loom.bias_add %a0, %bo : tensor<2x16x64xf32>, tensor<64xf32>
  %x1 = loom.add %x0, %a : tensor<2x16x64xf32>

  // MLP block.
  %g2 = loom.param @ln2.weight : tensor<64xf32>
  %b2 = loom.param @ln2.bias : tensor<64xf32>
  %h2 = loom.layer_norm %x1, %g2, %b2 axis 2 : tensor<2x16x64xf32>, tensor<64xf32>
  %wu = loom.param @mlp.up.weight : tensor<64x256xf32>
  %bu = loom.param @mlp.up.bias : tensor<256xf32>
  %u0 = loom.matmul %h2, %wu : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %u1 = loom.bias_add %u0, %bu : tensor<2x16x256xf32>, tensor<256xf32>
  %u = loom.gelu %u1 approximate tanh : tensor<2x16x256xf32>
  %wd = loom.param @mlp.down.weight : tensor<256x64xf32>
  %bd = loom.param @mlp.down.bias : tensor<64xf32>
  %d0 = loom.matmul %u, %wd : (tensor<2x16x256xf32>, tensor<256x64xf32>) -> tensor<2x16x64xf32>
  %d = loom.bias_add %d0, %bd : tensor<2x16x64xf32>, tensor<64xf32>
  %x2 = loom.add %x1, %d : tensor<2x16x64xf32>

  // Final norm, LM head tied to the embedding, loss.
  %gf = loom.param @lnf.weight : tensor<64xf32>
  %bf = loom.param @lnf.bias : tensor<64xf32>
  %hf = loom.layer_norm %x2, %gf, %bf axis 2 : tensor<2x16x64xf32>, tensor<64xf32>
  %logits = loom.matmul %hf, %wte transpose_rhs : (tensor<2x16x64xf32>, tensor<256x64xf32>) -> tensor<2x16x256xf32>
  %loss = loom.cross_entropy %logits, %labels : (tensor<2x16x256xf32>, tensor<2x16xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
