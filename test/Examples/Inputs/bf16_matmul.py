"""PyTorch's side of `loom-run --precision bf16`: matrix products as Loom computes them.

Loom's loom-mixed-precision pass turns every f32 matmul into
cast(A)->bf16, cast(B)->bf16, a bf16 GEMM (f32 products and sums, the
result rounded to bf16) and a cast back to f32; autodiff then makes the
backward GEMMs from the bf16 values, so they read the gradient rounded to
bf16 and round their results too. BF16Matmul does exactly that with f32
tensors holding bf16-rounded values (torch rounds to nearest even, as Loom
does). A linear layer's bias gradient sums that rounded gradient too
(loom-narrow-bias-gradients) inside the weight-gradient GEMM, which rounds
the sum to bf16 (loom-fuse-bias-grad, cuBLASLt's BGRAD epilogues; as
torch.autocast's bf16 bias gradient): BF16BiasAdd.
Everything else stays f32.

use_bf16_matmuls() routes F.linear and the `@` operator (the only GEMMs of
the example models) through it, like torch.autocast would route them.
A linear layer whose result is only read in bf16 (the GPT's QKV
projection) adds its bias inside the GEMM instead, rounded to bf16, and
rounds once (BF16NarrowedLinear, use_narrowed_bias()). One whose result is
added to the f32 residual stream (the GPT's output projections) gives the
f32 sum of its product and bias, never rounded to bf16: the GEMM adds the
bias and the residual itself (BF16ResidualLinear, use_residual_linear()).
One under a tanh GELU read only in bf16 (the GPT's MLP with GPT-2's GELU)
applies the GELU in the GEMM too and keeps the sum in bf16 for the
backward (BF16GeluLinear, use_gelu_linear()).

FusedAttention is loom.attention in bf16 (docs/design/attention.md), what
loom-run computes unless --unfused-attention: the scores and their gradient
dp stay f32, the probabilities and ds are rounded to bf16 before their
products, the backward recomputes p from the log-sum-exp and takes delta
from the rounded output. use_fused_attention() routes the GPT example's
attention through it.

LoomLayerNorm is loom.layer_norm_grad's backward: the row statistics,
sums and dx computed in f64 from the f32 values and rounded once, as the
layer_norm_backward kernels do (PyTorch's own backward sums in f32 in
another order, which moves a few bf16 roundings downstream).
use_loom_layer_norm() routes F.layer_norm through it.
"""
import math

import torch
import torch.nn.functional as F


def bf16(x):
    """x rounded to bf16 (to nearest even), kept as f32."""
    return x.to(torch.bfloat16).to(torch.float32)


def _flat_rows(x):
    return x.reshape(-1, x.shape[-1])


class BF16Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = bf16(a), bf16(b)
        ctx.save_for_backward(a, b)
        return bf16(torch.matmul(a, b))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        g = bf16(grad)
        da = bf16(torch.matmul(g, b.transpose(-1, -2)))
        if b.dim() == 2 and a.dim() > 2:
            # A weight shared by every batch: Loom makes one GEMM over all
            # rows (one rounding), not a product per batch and a sum.
            db = bf16(_flat_rows(a).t() @ _flat_rows(g))
        else:
            db = bf16(torch.matmul(a.transpose(-1, -2), g))
        return da, db


class BF16MatmulIntoGeluGrad(BF16Matmul):
    """BF16Matmul whose lhs gradient feeds a tanh GELU's backward (the
    second linear layer of an MLP whose first is BF16GeluLinear):
    loom-fuse-matmul-epilogue makes that gradient's GEMM multiply by the
    GELU's derivative before it rounds (loom.matmul_gelu_grad, cuBLASLt's
    DGELU), so the gradient is handed on unrounded; BF16GeluLinear's
    backward applies the derivative and rounds once."""
    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        _, db = BF16Matmul.backward(ctx, grad)
        return torch.matmul(bf16(grad), b.transpose(-1, -2)), db


def bias_gradient(grad):
    """The bias gradient of a linear layer whose output gradient is grad:
    the gradient rounded to bf16 (the copy the weight-gradient GEMM reads),
    summed over every row in f64 and rounded to bf16, as Loom's
    loom.matmul_bias_grad does (loom-fuse-bias-grad)."""
    leading = tuple(range(grad.dim() - 1))
    return bf16_once(bf16(grad).double().sum(dim=leading))


def bf16_once(x):
    """f64 x rounded to bf16 once (kept as f32). Going through f32 would
    round twice; rounding to f32 to odd first (truncate, then set the lowest
    bit when anything was dropped) keeps what the second rounding needs, as
    the CPU kernels' roundToBF16(double) does."""
    f = x.float()
    f = torch.where(f.double().abs() > x.abs(),
                    torch.nextafter(f, torch.zeros_like(f)), f)
    inexact = (f.double() != x).to(torch.int32)
    return bf16((f.view(torch.int32) | inexact).view(torch.float32))


class BF16BiasAdd(torch.autograd.Function):
    """y + bias, whose bias gradient is bias_gradient(); y's gradient
    passes unchanged."""
    @staticmethod
    def forward(ctx, y, bias):
        return y + bias

    @staticmethod
    def backward(ctx, grad):
        if grad.dim() == 1:  # no rows to sum: Loom has no reduce_sum there
            return grad, grad
        return grad, bias_gradient(grad)


class BF16NarrowedLinear(torch.autograd.Function):
    """A linear layer whose biased result is only read in bf16 (the GPT's
    QKV projection, which attention reads): loom-fuse-matmul-epilogue makes
    it one bf16 GEMM that adds the bias rounded to bf16 to the f32 sum and
    rounds once, as torch.autocast's linear does. The backward is
    BF16Matmul's and BF16BiasAdd's (the fusion comes after autodiff)."""
    @staticmethod
    def forward(ctx, x, weight, bias):
        a, w = bf16(x), bf16(weight)
        ctx.save_for_backward(a, w)
        return bf16(torch.matmul(a, w.t()) + bf16(bias))

    @staticmethod
    def backward(ctx, grad):
        return _linear_backward(ctx, grad)


def _linear_backward(ctx, grad):
    """The input, weight and bias gradients of a linear layer from the bf16
    input and weight it saved: BF16Matmul's and BF16BiasAdd's."""
    a, w = ctx.saved_tensors
    return _linear_backward_of(a, w, grad)


def _linear_backward_of(a, w, grad):
    g = bf16(grad)
    da = bf16(torch.matmul(g, w))
    dw = bf16(_flat_rows(g).t() @ _flat_rows(a))
    return da, dw, bias_gradient(grad)


class BF16ResidualLinear(torch.autograd.Function):
    """A linear layer whose biased result is added to an f32 tensor (the
    GPT's attention and MLP output projections, before the residual add):
    loom-fuse-matmul-epilogue makes the bf16 GEMM add the f32 bias and the
    residual to its f32 sums and store f32, so the product is never rounded
    to bf16 (the sum is product + bias, then + residual, as the CPU kernel
    adds them). The backward is BF16Matmul's and BF16BiasAdd's.
    With into_gelu_grad the input gradient is not rounded: it feeds
    BF16GeluLinear's backward (see BF16MatmulIntoGeluGrad)."""
    @staticmethod
    def forward(ctx, x, weight, bias, into_gelu_grad=False):
        a, w = bf16(x), bf16(weight)
        ctx.save_for_backward(a, w)
        ctx.into_gelu_grad = into_gelu_grad
        return torch.matmul(a, w.t()) + bias

    @staticmethod
    def backward(ctx, grad):
        a, w = ctx.saved_tensors
        da, dw, db = _linear_backward_of(a, w, grad)
        if ctx.into_gelu_grad:
            da = torch.matmul(bf16(grad), w)
        return da, dw, db, None


class BF16GeluLinear(torch.autograd.Function):
    """A linear layer under a tanh GELU whose result is only read in bf16
    (the GPT's MLP with GPT-2's GELU, feeding c_proj):
    loom-fuse-matmul-epilogue makes it one bf16 GEMM (cuBLASLt's
    GELU_AUX_BIAS) that adds the bias rounded to bf16 to the f32 sum, applies
    the GELU to that sum and rounds once, and keeps the sum rounded to bf16
    for the backward (torch.autocast keeps its bf16 linear's output there
    too). The backward: the GELU's derivative at the widened bf16 sum, in
    f32, times the next layer's unrounded input gradient (one GEMM,
    loom.matmul_gelu_grad), rounded once; then BF16Matmul's and
    BF16BiasAdd's."""
    @staticmethod
    def forward(ctx, x, weight, bias):
        a, w = bf16(x), bf16(weight)
        s = torch.matmul(a, w.t()) + bf16(bias)
        ctx.save_for_backward(a, w, bf16(s))
        return bf16(F.gelu(s, approximate="tanh"))

    @staticmethod
    def backward(ctx, grad):
        a, w, pre = ctx.saved_tensors
        with torch.enable_grad():
            p = pre.detach().requires_grad_()
            dpre, = torch.autograd.grad(F.gelu(p, approximate="tanh"), p, grad)
        return _linear_backward_of(a, w, dpre)


def use_gelu_linear(mlp_module):
    """Routes an MLP's c_fc and tanh GELU (export_gpt.MLP) through
    BF16GeluLinear, and its c_proj through BF16ResidualLinear handing the
    GELU an unrounded gradient."""
    use_residual_linear(mlp_module.c_proj, into_gelu_grad=True)

    def forward(x):
        h = BF16GeluLinear.apply(x, mlp_module.c_fc.weight, mlp_module.c_fc.bias)
        return mlp_module.dropout(mlp_module.c_proj(h))
    mlp_module.forward = forward


def use_residual_linear(linear_module, into_gelu_grad=False):
    """Routes linear_module (an nn.Linear whose output is added to the
    f32 residual stream) through BF16ResidualLinear."""
    linear_module.forward = lambda x: BF16ResidualLinear.apply(
        x, linear_module.weight, linear_module.bias, into_gelu_grad)


def use_linear_into_gelu_grad(linear_module):
    """Routes linear_module (an nn.Linear reading a BF16GeluLinear's
    result) through BF16MatmulIntoGeluGrad and BF16BiasAdd."""
    linear_module.forward = lambda x: BF16BiasAdd.apply(
        BF16MatmulIntoGeluGrad.apply(x, linear_module.weight.t()),
        linear_module.bias)


def use_narrowed_bias(linear_module):
    """Routes linear_module (an nn.Linear whose output only feeds bf16
    products) through BF16NarrowedLinear."""
    linear_module.forward = lambda x: BF16NarrowedLinear.apply(
        x, linear_module.weight, linear_module.bias)


def linear(x, weight, bias=None):
    y = BF16Matmul.apply(x, weight.t())
    return y if bias is None else BF16BiasAdd.apply(y, bias)


def use_bf16_matmuls():
    F.linear = linear
    torch.Tensor.__matmul__ = lambda a, b: BF16Matmul.apply(a, b)


# torch.matmul, not `@`: use_bf16_matmuls() reroutes the operator.
mm = torch.matmul


class FusedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, masked, scale):
        q, k, v = bf16(q), bf16(k), bf16(v)
        s = (mm(q, k.transpose(-1, -2)) * scale).masked_fill(masked, -math.inf)
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        out = bf16(mm(bf16(torch.softmax(s, dim=-1)), v))
        ctx.save_for_backward(q, k, v, masked, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, masked, out, lse = ctx.saved_tensors
        scale = ctx.scale
        dout = bf16(grad)
        s = (mm(q, k.transpose(-1, -2)) * scale).masked_fill(masked, -math.inf)
        p = torch.exp(s - lse)
        delta = (dout * out).sum(dim=-1, keepdim=True)
        ds = bf16((p * (mm(dout, v.transpose(-1, -2)) - delta)).masked_fill(
            masked, 0.0))
        dq = bf16(scale * mm(ds, k))
        dk = bf16(scale * mm(ds.transpose(-1, -2), q))
        dv = bf16(mm(bf16(p).transpose(-1, -2), dout))
        return dq, dk, dv, None, None


def use_fused_attention(attention_class):
    """Routes attention_class.attend (the GPT example's) through
    FusedAttention."""
    def attend(self, q, k, v, T):
        masked = self.bias[:, :, :T, :T] == 0
        return FusedAttention.apply(q, k, v, masked,
                                    1.0 / math.sqrt(self.head_dim))
    attention_class.attend = attend


class LoomLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shape, weight, bias, eps):
        ctx.save_for_backward(x, weight)
        ctx.dims = tuple(range(x.dim() - len(shape), x.dim()))
        ctx.eps = eps
        return _torch_layer_norm(x, shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        dims, eps = ctx.dims, ctx.eps
        x64, g64 = x.double(), grad.double()
        mean = x64.mean(dim=dims, keepdim=True)
        rstd = 1.0 / torch.sqrt(
            ((x64 - mean) ** 2).mean(dim=dims, keepdim=True) + eps)
        xhat = (x64 - mean) * rstd
        gx = g64 * weight.double()
        dx = rstd * (gx - gx.mean(dim=dims, keepdim=True)
                     - xhat * (gx * xhat).mean(dim=dims, keepdim=True))
        leading = tuple(range(x.dim() - len(dims)))
        dweight = (g64 * xhat).sum(dim=leading)
        dbias = g64.sum(dim=leading)
        return dx.float(), None, dweight.float(), dbias.float(), None


_torch_layer_norm = F.layer_norm


def use_loom_layer_norm():
    def layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
        return LoomLayerNorm.apply(x, tuple(shape), weight, bias, eps)
    F.layer_norm = layer_norm
