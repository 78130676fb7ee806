"""Causal attention with a position encoding's logit scale and additive bias, in blocks of query rows.

Each block of query rows is attended only against the keys it can see, so the bias is never built for all
rows of a long input at once. The bias and the softmax stay in float32 under bf16 autocast on every path (a
bias rounded to bf16 is off by up to 0.25 at magnitude 64): the CPU kernel takes a float32 mask beside bf16
queries; public SDPA (CUDA) runs a biased block in float32 with autocast off. On CPU, biases
that need a gradient go through SDPA's fused kernel with a recomputed mask gradient (``_CPUBiasedAttention``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ltsgen.encodings import PositionEncoding

#: Upper bound on batch * heads * query rows * keys of one attention block (64 Mi floats = 256 MiB).
BLOCK_ELEMENTS = 1 << 24
#: Query rows per chunk when the mask gradient is recomputed (chunks skip the keys their rows cannot see).
MASK_GRAD_ROWS = 128
#: The fused CPU attention kernel and its backward (private ATen ops of torch 2.x); public SDPA otherwise.
_FUSED_CPU = hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward")


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    encoding: PositionEncoding,
    entropy: torch.Tensor | None = None,
    block_elements: int = BLOCK_ELEMENTS,
    masks: dict[int, torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """Causal attention of q [B, H, Tq, D] against k, v [B, H, Tk, D] with ``encoding``'s scale and bias.

    Args:
        q, k, v: queries at ``q_positions`` [Tq], keys and values at ``k_positions`` [Tk] (consecutive).
        encoding: gives the logit scale and the bias (rotation is the caller's).
        entropy: [H, Tq] or None; when given, probabilities are computed explicitly and each head's
            attention entropy of every query row, summed over the batch, is added to it.
        block_elements: bound on batch * heads * rows * keys of one block of query rows.
        masks: a dict that keeps each block's mask for the next layer sharing ``encoding`` in this forward
            (filled on first use), or None to build masks afresh.

    Returns:
        The attention output [B, H, Tq, D].
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
        # a square block from the first key: the kernels' own (top-left) causal mask fits
        square = int(block_positions[0]) == first_key and block_positions.numel() == visible
        if masks is not None and start in masks:
            mask = masks[start]
        else:
            mask = _block_mask(encoding, block_positions, key_positions, square)
            if masks is not None:
                masks[start] = mask
        block_q = q[:, :, start : start + rows]
        if entropy is not None:
            future = key_positions[None, :] > block_positions[:, None]
            block_entropy = entropy[:, start : start + rows]
            outputs.append(_explicit_attention(block_q, keys, values, mask, future, scale, block_entropy))
        elif mask is not None and mask.is_floating_point() and q.device.type == "cpu" and _FUSED_CPU:
            outputs.append(_CPUBiasedAttention.apply(block_q, keys, values, mask, scale, square))
        else:
            outputs.append(_sdpa(block_q, keys, values, mask, scale))
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)


def _sdpa(q, k, v, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """Public SDPA; a float bias keeps the bias and the softmax in float32 under autocast (SDPA is on
    autocast's lower-precision list, which would round the bias to bf16), the output in q's dtype."""
    if mask is not None and mask.is_floating_point() and torch.is_autocast_enabled(q.device.type):
        with torch.autocast(q.device.type, enabled=False):
            out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, scale=scale)
        return out.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale)


def _block_mask(
    encoding: PositionEncoding, q_positions: torch.Tensor, k_positions: torch.Tensor, square: bool
) -> torch.Tensor | None:
    """The float32 bias with -inf on future keys [1, H, Tq, Tk]; without a bias, a boolean "may attend" mask,
    or None where the kernel's own causal mask fits."""
    future = k_positions[None, :] > q_positions[:, None]
    with torch.autocast(q_positions.device.type, enabled=False):  # the bias is computed in float32
        bias = encoding.bias(q_positions, k_positions)
    if bias is not None:
        return bias.float().masked_fill(future, float("-inf"))[None]
    return None if square else ~future


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
        # the mask gradient is computed in the mask's float32, whatever the dtype of q, k and v
        q, k, v, grad_out, out = (t.to(mask.dtype) for t in (q, k, v, grad_out, out))
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
    """Attention through explicit float32 probabilities; adds each row's entropy (summed over the batch) to
    ``entropy`` [H, rows]. Under autocast too: its bfloat16 matmuls would round the logits first."""
    with torch.autocast(q.device.type, enabled=False):
        logits = (q.float() @ k.float().transpose(-1, -2)) * scale
        if mask is not None and mask.dtype != torch.bool:
            logits = logits + mask
        else:
            logits = logits.masked_fill(future, float("-inf"))
        p = torch.softmax(logits, dim=-1)
        entropy += torch.special.entr(p).sum(-1).sum(dim=0)
        return (p @ v.float()).to(q.dtype)
