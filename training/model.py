"""A compact decoder-only transformer in the spirit of nanoGPT, with a pluggable position encoding.

Pre-norm blocks, SDPA attention with the encoding's bias as an additive float mask, tied embeddings and no
absolute position embedding. Long inputs are attended in blocks of query rows (each block only against the
keys it can see), so the bias is never built for all layers, or for all rows of a long input, at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ltsgen.encodings import NAMES, PositionEncoding, build

#: Upper bound on batch * heads * query rows * keys of one attention block (64 Mi floats = 256 MiB).
BLOCK_ELEMENTS = 1 << 24
#: Query rows per chunk when the mask gradient is recomputed (chunks skip the keys their rows cannot see).
MASK_GRAD_ROWS = 128
#: The fused CPU attention kernel and its backward (private ATen ops of torch 2.x); public SDPA otherwise.
_FUSED_CPU = hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward")


@dataclass(init=False)
class ModelConfig:
    """Architecture of a ``TransformerLM``; extra keyword arguments are options of the encoding."""

    vocab_size: int
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    encoding: str = "rope"
    mlp_ratio: int = 4
    encoding_options: dict = field(default_factory=dict)

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        encoding: str = "rope",
        mlp_ratio: int = 4,
        **encoding_options: object,
    ):
        if encoding not in NAMES:
            raise ValueError(f"unknown encoding {encoding!r}; choose one of {', '.join(NAMES)}")
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers),
                            ("n_heads", n_heads), ("mlp_ratio", mlp_ratio)):  # fmt: skip
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.encoding = encoding
        self.mlp_ratio = mlp_ratio
        self.encoding_options = dict(encoding_options)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        """A JSON-safe dict; ``ModelConfig.from_dict`` rebuilds the same config."""
        return {
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "encoding": self.encoding,
            "mlp_ratio": self.mlp_ratio,
            "encoding_options": dict(self.encoding_options),
        }

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        data = dict(data)
        encoding_options = data.pop("encoding_options", {})
        return cls(**data, **encoding_options)


class KVCache:
    """Rotated keys and values of the tokens seen so far, one entry per layer (for chunked evaluation)."""

    def __init__(self, n_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    @property
    def length(self) -> int:
        return 0 if self.keys[-1] is None else self.keys[-1].shape[2]

    def extend(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys[layer] is not None:
            keys = torch.cat((self.keys[layer], keys), dim=2)
            values = torch.cat((self.values[layer], values), dim=2)
        self.keys[layer], self.values[layer] = keys, values
        return keys, values


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    encoding: PositionEncoding,
    entropy: torch.Tensor | None = None,
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """Causal attention of q [B, H, Tq, D] against k, v [B, H, Tk, D] with ``encoding``'s scale and bias.

    Queries are processed in blocks of rows bounded by ``block_elements``; each block sees only keys up to
    its last position. When ``entropy`` ([H]) is given, probabilities are computed explicitly and the sum over
    batch and query rows of each head's attention entropy is added to it.
    """
    batch, heads, num_queries, head_dim = q.shape
    num_keys = k.shape[2]
    scale = encoding.logit_scale / math.sqrt(head_dim)
    rows = max(1, block_elements // (batch * heads * num_keys))
    first_key = int(k_positions[0])
    outputs = []
    for start in range(0, num_queries, rows):
        block_positions = q_positions[start : start + rows]
        visible = min(num_keys, int(block_positions[-1]) - first_key + 1)
        keys, values, key_positions = k[:, :, :visible], v[:, :, :visible], k_positions[:visible]
        bias = encoding.bias(block_positions, key_positions)
        future = key_positions[None, :] > block_positions[:, None]
        # a square block from the first key: the kernels' own (top-left) causal mask fits
        square = int(block_positions[0]) == first_key and block_positions.numel() == visible
        mask: torch.Tensor | None
        if bias is not None:
            mask = bias.to(q.dtype).masked_fill(future, float("-inf"))[None]
        else:
            mask = None if square else ~future
        block_q = q[:, :, start : start + rows]
        if entropy is not None:
            outputs.append(_explicit_attention(block_q, keys, values, mask, future, scale, entropy))
        elif mask is not None and mask.is_floating_point() and q.device.type == "cpu" and _FUSED_CPU:
            outputs.append(_CPUBiasedAttention.apply(block_q, keys, values, mask, scale, square))
        else:
            outputs.append(
                F.scaled_dot_product_attention(
                    block_q, keys, values, attn_mask=mask, is_causal=mask is None, scale=scale
                )
            )
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)


class _CPUBiasedAttention(torch.autograd.Function):
    """SDPA's fused CPU kernel with a float mask [1, H, Tq, Tk] (-inf on future keys) that may need a gradient.

    Queries are the last Tq key positions. Public SDPA cannot tell its kernel that a square block is causal
    when it also has a mask, so it computes the future half too, and it falls back to the unfused math path
    (several times slower) when the mask needs a gradient. Here the kernel skips future key blocks of square
    blocks, q, k and v take its fused backward, and the mask gradient (the gradient of the logits, summed over
    the batch) is recomputed from the saved log-sum-exp, per batch row and chunk of query rows, each chunk only
    against the keys it can see.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, causal):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, attn_mask=mask, scale=scale
        )
        ctx.save_for_backward(q, k, v, mask, out, lse)
        ctx.scale = scale
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, mask, out, lse = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_q, grad_k, grad_v = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad_out, q, k, v, out, lse, 0.0, ctx.causal, attn_mask=mask, scale=ctx.scale
        )
        if not ctx.needs_input_grad[3]:
            return grad_q, grad_k, grad_v, None, None, None
        grad_mask = torch.zeros_like(mask)
        row_dot = (grad_out * out).sum(-1, keepdim=True)
        num_queries, num_keys = mask.shape[-2:]
        for start in range(0, num_queries, MASK_GRAD_ROWS):
            end = min(start + MASK_GRAD_ROWS, num_queries)
            seen = num_keys - num_queries + end  # keys visible to the last row of this chunk
            chunk_mask = mask[0, :, start:end, :seen]
            chunk_grad = grad_mask[0, :, start:end, :seen]
            for b in range(q.shape[0]):
                keys, values = k[b, :, :seen].transpose(-1, -2), v[b, :, :seen].transpose(-1, -2)
                probs = torch.baddbmm(chunk_mask, q[b, :, start:end], keys, alpha=ctx.scale)
                # probabilities below e^-87 (~1e-38, where float32 underflows) are raised to it: exp's
                # underflow path is several times slower, and the difference is far below float32 precision
                probs.sub_(lse[b, :, start:end, None]).clamp_(min=-87.0).exp_()
                grad_probs = torch.bmm(grad_out[b, :, start:end], values).sub_(row_dot[b, :, start:end])
                chunk_grad.addcmul_(probs, grad_probs)
        return grad_q, grad_k, grad_v, grad_mask, None, None


def _explicit_attention(q, k, v, mask, future, scale, entropy):
    logits = (q @ k.transpose(-1, -2)) * scale
    if mask is not None and mask.dtype != torch.bool:
        logits = logits + mask
    else:
        logits = logits.masked_fill(future, float("-inf"))
    p = torch.softmax(logits, dim=-1)
    entropy += torch.special.entr(p).sum(-1).sum(dim=(0, 2))
    return p @ v


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, encoding: PositionEncoding):
        super().__init__()
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.encoding = encoding

    def forward(self, x, positions, layer, cache, entropy, block_elements):
        batch, time, channels = x.shape
        q, k, v = self.qkv(x).view(batch, time, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        q = self.encoding.rotate(q, positions)
        k = self.encoding.rotate(k, positions)
        if cache is not None:
            k, v = cache.extend(layer, k, v)
        k_positions = torch.arange(k.shape[2], device=x.device)
        y = attend(q, k, v, positions, k_positions, self.encoding, entropy, block_elements)
        return self.proj(y.transpose(1, 2).reshape(batch, time, channels))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, encoding: PositionEncoding):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = Attention(config, encoding)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.mlp_ratio * config.d_model, bias=False),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.d_model, config.d_model, bias=False),
        )

    def forward(self, x, positions, layer, cache, entropy, block_elements):
        x = x + self.attn(self.ln_1(x), positions, layer, cache, entropy, block_elements)
        return x + self.mlp(self.ln_2(x))


class TransformerLM(nn.Module):
    """Decoder-only language model; ``model(ids)`` -> logits, ``model(ids, targets)`` -> (logits, loss)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        #: Bound on batch * heads * query rows * keys per attention block; lower it to save memory.
        self.block_elements = BLOCK_ELEMENTS
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        encodings = self._build_encodings(config)
        self.blocks = nn.ModuleList(Block(config, encoding) for encoding in encodings)
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self._init_weights()

    @staticmethod
    def _build_encodings(config: ModelConfig) -> list[PositionEncoding]:
        first = build(config.encoding, config.n_heads, config.head_dim, **config.encoding_options)
        if first.shared_across_layers:
            return [first] * config.n_layers
        others = [build(config.encoding, config.n_heads, config.head_dim, **config.encoding_options)
                  for _ in range(config.n_layers - 1)]  # fmt: skip
        return [first, *others]

    def _init_weights(self) -> None:
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear) and ".encoding" not in name:
                std = residual_std if name.endswith(("attn.proj", "mlp.2")) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)
        nn.init.normal_(self.wte.weight, mean=0.0, std=0.02)

    def forward(
        self,
        input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, T, vocab]; with ``targets`` also the mean cross-entropy (-100 ignored).

        With a ``cache``, ``input_ids`` continue the tokens already in it (positions start at its length)
        and their keys and values are appended, so a long input can be evaluated chunk by chunk.
        """
        logits = self.lm_head(self.ln_f(self._hidden(input_ids, cache, None)))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        return logits, loss

    @torch.no_grad()
    def attention_entropy(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Attention entropy in nats [n_layers, n_heads], averaged over batch and query positions."""
        entropy = torch.zeros(self.config.n_layers, self.config.n_heads, device=input_ids.device)
        self._hidden(input_ids, None, entropy)
        return entropy / input_ids.numel()

    def _hidden(self, input_ids, cache, entropy):
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids)
        for layer, block in enumerate(self.blocks):
            layer_entropy = None if entropy is None else entropy[layer]
            x = block(x, positions, layer, cache, layer_entropy, self.block_elements)
        return x

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
