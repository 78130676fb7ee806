"""The compact model: configuration, loss, layer sharing, attention blocks, entropy and the bias-gradient kernel."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from ltsgen.encodings import alibi_slopes
from ltsgen.encodings.alibi import ALiBi
from ltsgen.training import KVCache, ModelConfig, TransformerLM
from ltsgen.training.attention import _CPUBiasedAttention, attend


def test_config_round_trips_through_json_with_encoding_options():
    config = ModelConfig(
        vocab_size=100, d_model=64, n_layers=3, n_heads=8, encoding="yarn", factor=8.0, original_length=64
    )
    data = json.loads(json.dumps(config.to_dict()))
    assert data["encoding_options"] == {"factor": 8.0, "original_length": 64}
    assert ModelConfig.from_dict(data) == config
    assert config.head_dim == 8
    model = TransformerLM(ModelConfig.from_dict(data))
    assert model.blocks[0].attn.encoding.factor == 8.0


def test_config_rejects_bad_values_with_one_line_messages():
    with pytest.raises(ValueError, match="unknown encoding 'rotary'"):
        ModelConfig(vocab_size=10, encoding="rotary")
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by n_heads \(4\)"):
        ModelConfig(vocab_size=10, d_model=30)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        ModelConfig(vocab_size=0)
    with pytest.raises(ValueError, match="has no option 'threshold'"):
        TransformerLM(ModelConfig(vocab_size=10, encoding="alibi", threshold=3))


def test_forward_returns_logits_and_mean_cross_entropy_ignoring_minus_100():
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, encoding="alibi"))
    ids = torch.randint(0, 50, (2, 12))
    targets = torch.randint(0, 50, (2, 12))
    targets[0, :5] = -100
    logits = model(ids)
    assert logits.shape == (2, 12, 50)
    same_logits, loss = model(ids, targets)
    torch.testing.assert_close(same_logits, logits)
    kept = targets != -100
    expected = F.cross_entropy(logits[kept], targets[kept])
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    assert model.lm_head.weight is model.wte.weight
    assert not any("pos" in name for name, _ in model.named_parameters())  # no absolute position embedding


@pytest.mark.parametrize(
    ("encoding", "options", "instances"),
    [("t5", {}, 1), ("kerple_log", {}, 1), ("alibi", {}, 1), ("fire", {}, 3), ("fire", {"share_across_layers": True}, 1),
     ("ape", {}, 3)],
)  # fmt: skip
def test_encodings_are_shared_across_layers_or_built_per_layer(encoding, options, instances):
    model = TransformerLM(
        ModelConfig(vocab_size=20, d_model=16, n_layers=3, n_heads=2, encoding=encoding, **options)
    )
    assert len({id(block.attn.encoding) for block in model.blocks}) == instances
    encoding_parameters = sum(p.numel() for n, p in model.named_parameters() if ".encoding." in n)
    per_instance = sum(p.numel() for p in model.blocks[0].attn.encoding.parameters())
    assert encoding_parameters == per_instance * instances


def test_long_inputs_build_the_bias_in_blocks_of_query_rows():
    torch.manual_seed(0)
    model = TransformerLM(
        ModelConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2, encoding="fire", threshold=8.0)
    )
    ids = torch.randint(0, 20, (1, 300))
    with torch.no_grad():
        full = model(ids)
    model.block_elements = 2 * 300 * 40
    shapes = []
    for block in model.blocks:
        original = block.attn.encoding.bias
        block.attn.encoding.bias = lambda q, k, original=original: (
            shapes.append((q.numel(), k.numel())) or original(q, k)
        )
    with torch.no_grad():
        blocked = model(ids)
    torch.testing.assert_close(blocked, full, rtol=1e-5, atol=1e-5)
    assert len(shapes) == 2 * math.ceil(300 / 40)
    assert max(2 * rows * keys for rows, keys in shapes) <= model.block_elements
    assert shapes[:2] == [(40, 40), (40, 80)]  # each block only sees the keys up to its last query


def test_kv_cache_decodes_one_token_at_a_time_like_the_full_pass():
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=30, d_model=32, n_layers=2, n_heads=4, encoding="ape"))
    ids = torch.randint(0, 30, (1, 20))
    cache = KVCache(2)
    with torch.no_grad():
        full = model(ids)
        steps = torch.cat([model(ids[:, t : t + 1], cache=cache) for t in range(20)], dim=1)
    assert cache.length == 20
    torch.testing.assert_close(steps, full, rtol=1e-5, atol=1e-5)


def zero_attention_weights(model: TransformerLM) -> None:
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight.zero_()


def test_attention_entropy_of_uniform_attention_is_mean_log_of_positions():
    model = TransformerLM(ModelConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2, encoding="nope"))
    zero_attention_weights(model)
    model.block_elements = 3 * 2 * 100 * 16
    entropy = model.attention_entropy(torch.randint(0, 20, (3, 100)))
    expected = sum(math.log(i + 1) for i in range(100)) / 100
    torch.testing.assert_close(entropy, torch.full((2, 2), expected), rtol=1e-5, atol=1e-5)


def test_attention_entropy_with_alibi_matches_the_closed_form():
    model = TransformerLM(ModelConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=4, encoding="alibi"))
    zero_attention_weights(model)
    entropy = model.attention_entropy(torch.randint(0, 20, (1, 64)))[0]
    expected = []
    for slope in alibi_slopes(4).tolist():
        total = 0.0
        for i in range(64):
            weights = torch.tensor([math.exp(-slope * n) for n in range(i + 1)], dtype=torch.float64)
            p = weights / weights.sum()
            total += float(-(p * p.log()).sum())
        expected.append(total / 64)
    torch.testing.assert_close(entropy, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-5)


def test_attention_entropy_under_bfloat16_autocast_is_that_of_float32_logits():
    """``--eval-dtype bfloat16`` runs the model under autocast, whose matmuls would round q.k to bfloat16."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 1, 2, 300, 8) * 3).bfloat16()
    positions = torch.arange(300)
    entropies = []
    for autocast in (False, True):
        entropy = torch.zeros(2, 300)
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            attend(q, k, v, positions, positions, ALiBi(2, 8), entropy=entropy)
        entropies.append(entropy)
    torch.testing.assert_close(entropies[1], entropies[0], rtol=1e-5, atol=1e-5)  # 0.1 nats apart before


@pytest.mark.parametrize(("rows", "causal"), [(7, False), (19, True), (19, False)])
def test_biased_attention_kernel_matches_sdpa_math_path(rows, causal):
    torch.manual_seed(0)
    batch, heads, keys, dim = 3, 4, 19, 8
    q, k, v = (torch.randn(batch, heads, n, dim, requires_grad=True) for n in (rows, keys, keys))
    positions = torch.arange(keys - rows, keys)
    future = torch.arange(keys)[None, :] > positions[:, None]
    mask = torch.randn(1, heads, rows, keys).masked_fill(future, float("-inf")).requires_grad_()
    grad_out = torch.randn(batch, heads, rows, dim)
    ours = _CPUBiasedAttention.apply(q, k, v, mask, 0.3, causal)
    ours_grads = torch.autograd.grad(ours, (q, k, v, mask), grad_out)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    reference_grads = torch.autograd.grad(reference, (q, k, v, mask), grad_out)
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours_grads, reference_grads, strict=True):
        torch.testing.assert_close(
            a.masked_fill(a.isinf(), 0), b.masked_fill(b.isinf(), 0), rtol=1e-4, atol=1e-5
        )
    assert float(ours_grads[3][0][:, future].abs().max()) < 1e-30  # masked keys: probability below 1e-37


def test_biased_attention_kernel_with_a_fixed_bias_matches_explicit_softmax_over_kernel_blocks():
    # ALiBi's training path: a bias without gradient, a square causal block longer than the kernel's blocks
    torch.manual_seed(0)
    batch, heads, length, dim = 2, 4, 150, 16
    q, k, v = (torch.randn(batch, heads, length, dim, requires_grad=True) for _ in range(3))
    positions = torch.arange(length)
    future = positions[None, :] > positions[:, None]
    bias = -alibi_slopes(heads)[:, None, None] * (positions[:, None] - positions[None, :]).clamp(min=0)
    mask = bias.float().masked_fill(future, float("-inf"))[None]
    grad_out = torch.randn(batch, heads, length, dim)
    ours = _CPUBiasedAttention.apply(q, k, v, mask, dim**-0.5, True)
    reference = torch.softmax(q @ k.transpose(-1, -2) * dim**-0.5 + mask, dim=-1) @ v
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)
    ours_grads = torch.autograd.grad(ours, (q, k, v), grad_out)
    for a, b in zip(ours_grads, torch.autograd.grad(reference, (q, k, v), grad_out), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_attend_scales_logits_by_the_encodings_logit_scale():
    from ltsgen.encodings import build

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    positions = torch.arange(5)
    yarn = build("yarn", 2, 8, factor=4.0)
    out = attend(q, k, v, positions, positions, yarn)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=yarn.logit_scale / math.sqrt(8))
    torch.testing.assert_close(out, reference)
    assert yarn.logit_scale > 1.2


class _TwoKeyBias(ALiBi):
    """A bias of -80.2 and -79.9 on two keys: 0.3 apart, which bf16 (spacing 0.5 at 80) rounds to equal."""

    def bias(self, q_positions, k_positions):
        return torch.tensor([-80.2, -79.9])[None, None, :].expand(self.num_heads, q_positions.numel(), 2)


def test_the_bias_stays_float32_under_bf16_autocast():
    encoding = _TwoKeyBias(1, 8)
    q = torch.zeros(1, 1, 1, 8, dtype=torch.bfloat16)
    k = torch.zeros(1, 1, 2, 8, dtype=torch.bfloat16)
    v = torch.eye(2, 8)[None, None].to(torch.bfloat16)  # the output is the attention probabilities
    expected = torch.softmax(torch.tensor([-80.2, -79.9]), dim=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q, k, v, torch.tensor([1]), torch.arange(2), encoding)
        entropy = torch.zeros(1, 1)
        explicit = attend(q, k, v, torch.tensor([1]), torch.arange(2), encoding, entropy)
    for probabilities in (out[0, 0, 0, :2].float(), explicit[0, 0, 0, :2].float()):
        torch.testing.assert_close(probabilities, expected, atol=4e-3, rtol=0)  # bf16 output rounding only
        assert abs(float(probabilities[0]) - 0.5) > 0.07  # a bias rounded to bf16 would give 0.5 / 0.5


def test_the_public_sdpa_path_keeps_bias_and_softmax_float32_under_autocast(monkeypatch):
    # the path CUDA takes (public SDPA), forced on the CPU: SDPA under autocast would round the bias to bf16
    from ltsgen.training import attention

    monkeypatch.setattr(attention, "_FUSED_CPU", False)
    encoding = _TwoKeyBias(1, 8)
    q, k = torch.zeros(1, 1, 1, 8), torch.zeros(1, 1, 2, 8)
    v = torch.eye(2, 8)[None, None]  # the output is the attention weights
    expected = torch.softmax(torch.tensor([-80.2, -79.9]), dim=0)  # [0.4256, 0.5744]
    mask = torch.tensor([[[[-80.2, -79.9]]]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rounded = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = attend(q, k, v, torch.tensor([1]), torch.arange(2), encoding)
    assert rounded[0, 0, 0, :2].float().tolist() == [0.5, 0.5]  # what autocast alone gives
    torch.testing.assert_close(out[0, 0, 0, :2], expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("encoding", ["alibi", "kerple_log", "t5", "fire", "ape"])
def test_training_under_cpu_bf16_autocast_keeps_gradients_close_to_float32(encoding):
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=2, encoding=encoding))
    ids = torch.randint(0, 50, (2, 33))
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    reference = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, low = model(ids[:, :-1], ids[:, 1:])
    low.backward()
    assert float(low.detach()) == pytest.approx(float(loss.detach()), rel=2e-3)
    for name, parameter in model.named_parameters():
        # the bias parameters get their float32 gradient (FIRE's output bias moves every key alike, which the
        # softmax ignores: its gradient is rounding noise in both)
        if ".encoding." in name and name in reference and float(reference[name].norm()) > 1e-8:
            cosine = F.cosine_similarity(parameter.grad.flatten().float(), reference[name].flatten(), dim=0)
            assert float(cosine) > 0.98, name


def test_what_the_layers_share_is_computed_once_per_forward():
    model = TransformerLM(ModelConfig(vocab_size=20, d_model=16, n_layers=3, n_heads=2, encoding="alibi"))
    calls = {"bias": 0}
    encoding = model.blocks[0].attn.encoding
    original = encoding.bias

    def counted(*args):
        calls["bias"] += 1
        return original(*args)

    encoding.bias = counted
    model(torch.randint(0, 20, (1, 40)))
    assert calls["bias"] == 1  # one block of rows, one shared encoding: one bias for three layers
    rope = TransformerLM(ModelConfig(vocab_size=20, d_model=16, n_layers=3, n_heads=2, encoding="rope"))
    tables = {"n": 0}
    rotary = rope.blocks[0].attn.encoding.rotary_tables

    def counted_tables(positions):
        tables["n"] += 1
        return rotary(positions)

    rope.blocks[0].attn.encoding.rotary_tables = counted_tables
    rope(torch.randint(0, 20, (1, 40)))
    assert tables["n"] == 1  # cos/sin once, for q and k of every layer
    fire = TransformerLM(ModelConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2, encoding="fire"))
    assert len(fire.encodings) == 2 and len(model.encodings) == 1  # per-layer FIRE: its own bias per layer
