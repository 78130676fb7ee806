"""A compact decoder-only transformer in the spirit of nanoGPT, with a pluggable position encoding.

Pre-norm blocks, SDPA attention with the encoding's bias as an additive float mask (``attention.attend``),
tied embeddings and no absolute position embedding. What the layers of one encoding share is computed once
per forward: the rotary cos/sin tables and, when they fit, the bias masks of a shared encoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ltsgen.encodings import NAMES, PositionEncoding, build
from ltsgen.encodings.base import RotaryTables
from ltsgen.training.attention import BLOCK_ELEMENTS, attend

#: Largest heads * query rows * keys of the masks one forward keeps for the layers of a shared encoding
#: (64 MiB of float32): training lengths fit; long evaluation inputs rebuild each block's mask per layer.
SHARED_MASK_ELEMENTS = 1 << 24


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


@dataclass
class _Shared:
    """What the layers using one encoding module share within one forward."""

    tables: RotaryTables | None  # cos/sin at the query positions
    masks: dict[int, torch.Tensor | None] | None  # each block's mask, kept when the layers can reuse it


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, encoding: PositionEncoding):
        super().__init__()
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.encoding = encoding

    def forward(self, x, positions, layer, cache, entropy, block_elements, shared: _Shared):
        batch, time, channels = x.shape
        q, k, v = self.qkv(x).view(batch, time, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        q = self.encoding.rotate(q, positions, shared.tables)
        k = self.encoding.rotate(k, positions, shared.tables)
        if cache is not None:
            k, v = cache.extend(layer, k, v)
        k_positions = torch.arange(k.shape[2], device=x.device)
        y = attend(q, k, v, positions, k_positions, self.encoding, entropy, block_elements, shared.masks)
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

    def forward(self, x, positions, layer, cache, entropy, block_elements, shared: _Shared):
        x = x + self.attn(self.ln_1(x), positions, layer, cache, entropy, block_elements, shared)
        return x + self.mlp(self.ln_2(x))


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [B, T, vocab] against ``targets`` [B, T] (-100 ignored), in float32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)


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

    @property
    def encodings(self) -> list[PositionEncoding]:
        """The distinct encoding modules, in layer order (one when it is shared across layers)."""
        return list({id(block.attn.encoding): block.attn.encoding for block in self.blocks}.values())

    def configure_optimizer(
        self, lr: float, weight_decay: float, betas: tuple[float, float], fused: bool
    ) -> torch.optim.AdamW:
        """AdamW that decays matrices (weights, embeddings) and leaves gains, biases and every position-encoding
        parameter alone (decay would pull a T5 table towards zero and APE's frequencies back to plain RoPE)."""
        encoding_params = {id(param) for encoding in self.encodings for param in encoding.parameters()}
        decay, no_decay = [], []
        for param in self.parameters():
            if param.requires_grad:
                wanted = param.dim() >= 2 and id(param) not in encoding_params
                (decay if wanted else no_decay).append(param)
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)

    def set_eval_length(self, length: int) -> None:
        """Prepare every encoding to read ``length`` tokens (zero-shot rescaling of RoPE-PI and YaRN)."""
        for encoding in self.encodings:
            encoding.set_eval_length(length)

    def learned_encoding_values(self) -> list[dict[str, Any]]:
        """What each distinct encoding module learned (one entry per layer, or one when shared)."""
        return [encoding.learned() for encoding in self.encodings]

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
        return logits, next_token_loss(logits, targets)

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] of the token after each sequence (the output layer runs on the last position only)."""
        return self.lm_head(self.ln_f(self._hidden(input_ids, None, None)[:, -1]))

    @torch.no_grad()
    def attention_entropy(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Attention entropy in nats [n_layers, n_heads], averaged over batch and query positions."""
        return self.attention_entropy_by_position(input_ids).mean(dim=-1)

    @torch.no_grad()
    def attention_entropy_by_position(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Attention entropy in nats [n_layers, n_heads, T] of every query position, averaged over the batch."""
        length = input_ids.shape[1]
        entropy = torch.zeros(self.config.n_layers, self.config.n_heads, length, device=input_ids.device)
        self._hidden(input_ids, None, entropy)
        return entropy / input_ids.shape[0]

    def _hidden(self, input_ids, cache, entropy):
        start = 0 if cache is None else cache.length
        length = input_ids.shape[1]
        positions = torch.arange(start, start + length, device=input_ids.device)
        layers_of: dict[int, int] = {}
        for block in self.blocks:
            layers_of[id(block.attn.encoding)] = layers_of.get(id(block.attn.encoding), 0) + 1
        shared: dict[int, _Shared] = {}
        x = self.wte(input_ids)
        for layer, block in enumerate(self.blocks):
            encoding = block.attn.encoding
            if id(encoding) not in shared:
                reuse = (
                    layers_of[id(encoding)] > 1
                    and self.config.n_heads * length * (start + length) <= SHARED_MASK_ELEMENTS
                )
                shared[id(encoding)] = _Shared(encoding.rotary_tables(positions), {} if reuse else None)
            layer_entropy = None if entropy is None else entropy[layer]
            x = block(x, positions, layer, cache, layer_entropy, self.block_elements, shared[id(encoding)])
        return x

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
