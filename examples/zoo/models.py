"""The model families people train, written in plain PyTorch the way the
Hugging Face `transformers` implementations write them, so that their ONNX
exports contain what the real ones do (torch.max against finfo.min, causal
masks from torch.full + triu, rotary caches from einsum, cos/sin gathered by
position, GQA's repeat_kv, NeoX's Tile + GatherElements rotary lookup, OPT's
positions from a cumsum of the attention mask, a ViT's Conv patches, ...).

    llama  RMSNorm, rotary embeddings, SwiGLU, grouped-query attention
    neox   GPT-NeoX: fused QKV per head, partial rotary, parallel residual
    opt    OPT: learned positions from cumsum(attention_mask), ReLU MLP,
           embedding tied to the LM head, attention_mask a graph input
    bert   BERT: post-LN encoder, token types, masked-LM head (tied)
    vit    ViT: Conv patch embedding, class token, image classifier

`build(family, size)` returns (model, example inputs as a dict name ->
tensor, labels shape); `size` is "tiny" (tests) or "bench" (benchmarks).
Dropout is 0 everywhere, so training is deterministic.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILIES = ["llama", "neox", "opt", "bert", "vit"]


# --------------------------------------------------------------------------
# LLaMA
# --------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class Rotary(nn.Module):
    """cos/sin caches built from an inv_freq buffer with einsum, as HF's
    LlamaRotaryEmbedding; `dim` may be a part of the head (NeoX)."""

    def __init__(self, dim, max_positions, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.max_positions = max_positions

    def forward(self, seq_len):
        t = torch.arange(self.max_positions, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[:seq_len], emb.sin()[:seq_len]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads, max_positions):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d, bias=False)
        self.rotary = Rotary(self.head_dim, max_positions)

    def repeat_kv(self, x):
        b, h, t, d = x.shape
        n = self.heads // self.kv_heads
        if n == 1:
            return x
        x = x[:, :, None, :, :].expand(b, h, n, t, d)
        return x.reshape(b, h * n, t, d)

    def forward(self, x, mask, position_ids):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(t)
        cos = cos[position_ids].unsqueeze(1)
        sin = sin[position_ids].unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        att = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        att = att + mask
        att = torch.max(att, torch.tensor(torch.finfo(att.dtype).min))
        att = F.softmax(att, dim=-1, dtype=torch.float32)
        y = (att @ v).transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden, max_positions):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, heads, kv_heads, max_positions)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = LlamaMLP(d, hidden)

    def forward(self, x, mask, position_ids):
        x = x + self.self_attn(self.input_layernorm(x), mask, position_ids)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, heads, kv_heads, hidden,
                 max_positions):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            LlamaLayer(d, heads, kv_heads, hidden, max_positions)
            for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        b, t = input_ids.shape
        position_ids = torch.arange(t).unsqueeze(0).expand(b, t)
        mask = torch.full((t, t), torch.finfo(torch.float32).min).triu(1)
        mask = mask[None, None, :, :]
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, mask, position_ids)
        return self.lm_head(self.norm(x))


# --------------------------------------------------------------------------
# GPT-NeoX
# --------------------------------------------------------------------------

class NeoXAttention(nn.Module):
    def __init__(self, d, heads, rotary_pct, max_positions):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.rotary_ndims = int(self.head_dim * rotary_pct)
        self.query_key_value = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)
        self.rotary = Rotary(self.rotary_ndims, max_positions)
        causal = torch.tril(torch.ones(max_positions, max_positions,
                                       dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_positions,
                                                 max_positions),
                             persistent=False)

    def forward(self, x, position_ids):
        b, t, _ = x.shape
        qkv = self.query_key_value(x).view(b, t, self.heads,
                                           3 * self.head_dim).permute(0, 2, 1, 3)
        q = qkv[..., : self.head_dim]
        k = qkv[..., self.head_dim: 2 * self.head_dim]
        v = qkv[..., 2 * self.head_dim:]
        r = self.rotary_ndims
        q_rot, q_pass = q[..., :r], q[..., r:]
        k_rot, k_pass = k[..., :r], k[..., r:]
        cos, sin = self.rotary(t)
        cos, sin = cos[None, None], sin[None, None]
        # The lookup older NeoX code does: repeat (Tile) + gather
        # (GatherElements) by position.
        index = position_ids[:, None, :, None].repeat(1, cos.shape[1], 1,
                                                      cos.shape[3])
        cos = torch.gather(cos.repeat(index.shape[0], 1, 1, 1), 2, index)
        sin = torch.gather(sin.repeat(index.shape[0], 1, 1, 1), 2, index)
        q = torch.cat((q_rot * cos + rotate_half(q_rot) * sin, q_pass), dim=-1)
        k = torch.cat((k_rot * cos + rotate_half(k_rot) * sin, k_pass), dim=-1)
        att = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        keep = self.bias[:, :, :t, :t]
        att = torch.where(keep, att,
                          torch.tensor(torch.finfo(att.dtype).min))
        att = F.softmax(att, dim=-1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(b, t, -1)
        return self.dense(y)


class NeoXLayer(nn.Module):
    def __init__(self, d, heads, hidden, rotary_pct, max_positions):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(d)
        self.post_attention_layernorm = nn.LayerNorm(d)
        self.attention = NeoXAttention(d, heads, rotary_pct, max_positions)
        self.dense_h_to_4h = nn.Linear(d, hidden)
        self.dense_4h_to_h = nn.Linear(hidden, d)

    def forward(self, x, position_ids):
        attn = self.attention(self.input_layernorm(x), position_ids)
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(
            self.post_attention_layernorm(x))))
        return x + attn + mlp  # parallel residual


class NeoX(nn.Module):
    def __init__(self, vocab, d, layers, heads, hidden, max_positions,
                 rotary_pct=0.25):
        super().__init__()
        self.embed_in = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            NeoXLayer(d, heads, hidden, rotary_pct, max_positions)
            for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(d)
        self.embed_out = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        b, t = input_ids.shape
        position_ids = torch.arange(t).unsqueeze(0).view(-1, t).expand(b, t)
        x = self.embed_in(input_ids)
        for layer in self.layers:
            x = layer(x, position_ids)
        return self.embed_out(self.final_layer_norm(x))


# --------------------------------------------------------------------------
# OPT
# --------------------------------------------------------------------------

class OPTLayer(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, mask):
        b, t, d = x.shape
        h = self.self_attn_layer_norm(x)

        def heads(y):
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        q = heads(self.q_proj(h) * self.head_dim ** -0.5)
        k, v = heads(self.k_proj(h)), heads(self.v_proj(h))
        att = q @ k.transpose(-1, -2) + mask
        att = torch.max(att, torch.tensor(torch.finfo(att.dtype).min))
        att = F.softmax(att, dim=-1)
        x = x + self.out_proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))


class OPT(nn.Module):
    OFFSET = 2  # OPT's learned positions start at index 2

    def __init__(self, vocab, d, layers, heads, hidden, max_positions,
                 pad=1):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d, padding_idx=pad)
        self.embed_positions = nn.Embedding(max_positions + self.OFFSET, d)
        self.layers = nn.ModuleList(OPTLayer(d, heads, hidden)
                                    for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed_tokens.weight  # tied

    def forward(self, input_ids, attention_mask):
        b, t = input_ids.shape
        mask = attention_mask.long()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() - 1
        x = self.embed_tokens(input_ids) + self.embed_positions(
            positions + self.OFFSET)
        lowest = torch.finfo(torch.float32).min
        causal = torch.full((t, t), lowest).triu(1)[None, None]
        padding = (1.0 - attention_mask[:, None, None, :].float()) * lowest
        full = causal + padding
        for layer in self.layers:
            x = layer(x, full)
        return self.lm_head(self.final_layer_norm(x))


# --------------------------------------------------------------------------
# BERT
# --------------------------------------------------------------------------

class BertLayer(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.query, self.key = nn.Linear(d, d), nn.Linear(d, d)
        self.value, self.output = nn.Linear(d, d), nn.Linear(d, d)
        self.attention_norm = nn.LayerNorm(d, eps=1e-12)
        self.intermediate, self.out = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.output_norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x):
        b, t, d = x.shape

        def heads(y):
            return y.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        att = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), -1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        x = self.attention_norm(x + self.output(y))
        return self.output_norm(x + self.out(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    def __init__(self, vocab, d, layers, heads, hidden, max_positions,
                 pad=0):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d, padding_idx=pad)
        self.position_embeddings = nn.Embedding(max_positions, d)
        self.token_type_embeddings = nn.Embedding(2, d)
        self.embeddings_norm = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, hidden)
                                    for _ in range(layers))
        self.transform = nn.Linear(d, d)
        self.transform_norm = nn.LayerNorm(d, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, input_ids):
        b, t = input_ids.shape
        positions = torch.arange(t).expand(b, t)
        types = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) +
             self.position_embeddings(positions) +
             self.token_type_embeddings(types))
        x = self.embeddings_norm(x)
        for layer in self.layers:
            x = layer(x)
        x = self.transform_norm(F.gelu(self.transform(x)))
        return x @ self.word_embeddings.weight.t() + self.decoder_bias


# --------------------------------------------------------------------------
# ViT
# --------------------------------------------------------------------------

class ViTLayer(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.layernorm_before = nn.LayerNorm(d, eps=1e-12)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.layernorm_after = nn.LayerNorm(d, eps=1e-12)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.layernorm_before(x)).split(d, dim=-1)

        def heads(y):
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        att = F.softmax(heads(q) @ heads(k).transpose(-1, -2) /
                        math.sqrt(self.head_dim), dim=-1)
        x = x + self.proj((att @ heads(v)).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.layernorm_after(x))))


class ViT(nn.Module):
    def __init__(self, image, patch, channels, d, layers, heads, hidden,
                 classes):
        super().__init__()
        self.patch_embeddings = nn.Conv2d(channels, d, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        count = (image // patch) ** 2
        self.position_embeddings = nn.Parameter(
            torch.randn(1, count + 1, d) * 0.02)
        self.layers = nn.ModuleList(ViTLayer(d, heads, hidden)
                                    for _ in range(layers))
        self.layernorm = nn.LayerNorm(d, eps=1e-12)
        self.classifier = nn.Linear(d, classes)

    def forward(self, pixel_values):
        b = pixel_values.shape[0]
        x = self.patch_embeddings(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        x = x + self.position_embeddings
        for layer in self.layers:
            x = layer(x)
        return self.classifier(self.layernorm(x)[:, 0])


# --------------------------------------------------------------------------

SIZES = {
    # (batch, sequence or image, width, layers, heads, hidden, vocab)
    "tiny": (2, 16, 32, 2, 4, 48, 64),
    "bench": (8, 128, 256, 4, 8, 688, 512),
}


def build(family, size="tiny", seed=0):
    """(model, inputs {name: tensor}, labels shape, padding rows {param
    name: row}). Inputs are random, drawn from a generator seeded with
    `seed` + 1."""
    batch, seq, d, layers, heads, hidden, vocab = SIZES[size]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, vocab, (batch, seq), generator=gen)
    padding = {}
    if family == "llama":
        model = Llama(vocab, d, layers, heads, max(1, heads // 2), hidden, seq)
        inputs = {"input_ids": tokens}
    elif family == "neox":
        model = NeoX(vocab, d, layers, heads, hidden, seq)
        inputs = {"input_ids": tokens}
    elif family == "opt":
        model = OPT(vocab, d, layers, heads, hidden, seq)
        inputs = {"input_ids": tokens,
                  "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
        padding["embed_tokens.weight"] = 1
    elif family == "bert":
        model = Bert(vocab, d, layers, heads, hidden, seq)
        inputs = {"input_ids": tokens}
        padding["word_embeddings.weight"] = 0
    elif family == "vit":
        image = 32 if size == "tiny" else 64
        model = ViT(image, 8, 3, d, layers, heads, hidden, 10)
        inputs = {"pixel_values": torch.rand(batch, 3, image, image,
                                             generator=gen)}
        return model, inputs, (batch,), padding, 10
    else:
        raise ValueError("unknown family " + family)
    return model, inputs, (batch, seq), padding, vocab
