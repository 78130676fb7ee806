"""The pure math of ltsgen.encodings against Hugging Face transformers and the test vectors of the spec.
The tests that compare with transformers import it themselves: collecting the suite leaves it unimported
(4-5 s in each test process, which the process that never runs these tests saves)."""

from __future__ import annotations

import math

import pytest
import torch

from ltsgen.encodings import (
    alibi_slopes,
    fire_normalized_distance,
    rope_inv_freq,
    t5_relative_position_bucket,
    yarn_inv_freq,
)


def llama_config(head_dim: int, **rope_parameters):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=head_dim * 4,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=8192,
        rope_parameters=rope_parameters,
    )


# ---- ALiBi -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48])
def test_alibi_slopes_match_bloom(num_heads):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    ours = alibi_slopes(num_heads)
    reference = _get_alibi_slopes(num_heads, torch.device("cpu"))
    torch.testing.assert_close(ours.float(), reference, rtol=1e-6, atol=0)


def test_alibi_bias_matches_bloom_alibi_tensor_up_to_a_row_constant():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    from ltsgen.encodings import build

    num_heads, length = 6, 20
    positions = torch.arange(length)
    ours = build("alibi", num_heads, 8).bias(positions, positions)  # -m (i - j)
    bloom = build_alibi_tensor(torch.ones(1, length), num_heads, torch.float32)  # m * j, [H, 1, T]
    # softmax ignores the per-row constant -m * i that separates the two
    row_constant = -alibi_slopes(num_heads).float()[:, None, None] * positions[None, :, None]
    causal = positions[None, :] <= positions[:, None]
    torch.testing.assert_close(
        ours.masked_fill(~causal, 0), (bloom + row_constant).masked_fill(~causal, 0), rtol=1e-6, atol=1e-4
    )


@pytest.mark.parametrize(
    ("num_heads", "expected"),
    [
        (8, [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]),
        (12, [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
              0.7071067811865476, 0.35355339059327384, 0.17677669529663692, 0.08838834764831849]),
        (6, [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]),
    ],
)  # fmt: skip
def test_alibi_slopes_spec_vectors(num_heads, expected):
    torch.testing.assert_close(
        alibi_slopes(num_heads), torch.tensor(expected, dtype=torch.float64), rtol=1e-15, atol=0
    )


# ---- T5 ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (32, 256), (8, 20)])
def test_t5_buckets_match_transformers(num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    distance = torch.arange(0, 5000)
    reference = T5Attention._relative_position_bucket(
        -distance, bidirectional=False, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(t5_relative_position_bucket(distance, num_buckets, max_distance), reference)


def test_t5_bucket_spec_vectors():
    pairs = {
        0: 0,
        1: 1,
        2: 2,
        5: 5,
        8: 8,
        15: 15,
        16: 16,
        20: 17,
        50: 24,
        100: 30,
        127: 31,
        128: 31,
        500: 31,
        1000: 31,
    }
    buckets = t5_relative_position_bucket(torch.tensor(list(pairs)))
    assert buckets.tolist() == list(pairs.values())
    first = {16: 16, 17: 19, 18: 21, 19: 24, 20: 27, 21: 31, 22: 35, 23: 40, 24: 46, 25: 52, 26: 59,
             27: 67, 28: 77, 29: 87, 30: 99, 31: 113}  # fmt: skip
    all_buckets = t5_relative_position_bucket(torch.arange(2000)).tolist()
    assert {bucket: all_buckets.index(bucket) for bucket in first} == first
    assert t5_relative_position_bucket(torch.tensor([-3, -1])).tolist() == [0, 0]


# ---- RoPE, PI, YaRN ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("head_dim", "base"), [(64, 10000.0), (32, 10000.0), (16, 500000.0), (128, 1e6)])
def test_rope_inv_freq_matches_transformers_llama_default(head_dim, base):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = llama_config(head_dim, rope_type="default", rope_theta=base)
    reference, attention_scale = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    assert attention_scale == 1.0
    torch.testing.assert_close(rope_inv_freq(head_dim, base).float(), reference, rtol=1e-6, atol=0)


@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_pi_matches_transformers_linear(factor):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from ltsgen.encodings import build

    config = llama_config(64, rope_type="linear", rope_theta=10000.0, factor=factor)
    reference, attention_scale = ROPE_INIT_FUNCTIONS["linear"](config)
    encoding = build("rope_pi", 4, 64, factor=factor)
    assert attention_scale == 1.0 and encoding.logit_scale == 1.0
    torch.testing.assert_close(encoding.inv_freq, reference, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    ("head_dim", "base", "factor", "original_length", "beta_fast", "beta_slow"),
    [(64, 10000.0, 4.0, 512, 32.0, 1.0), (32, 10000.0, 8.0, 128, 32.0, 1.0), (128, 500000.0, 16.0, 4096, 32.0, 1.0),
     (64, 10000.0, 2.0, 64, 16.0, 2.0), (16, 10000.0, 4.0, 64, 32.0, 1.0)],
)  # fmt: skip
def test_yarn_matches_transformers(head_dim, base, factor, original_length, beta_fast, beta_slow):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = llama_config(
        head_dim, rope_type="yarn", rope_theta=base, factor=factor,
        original_max_position_embeddings=original_length, beta_fast=beta_fast, beta_slow=beta_slow,
    )  # fmt: skip
    reference, reference_scale = ROPE_INIT_FUNCTIONS["yarn"](config)
    inv_freq, attention_scale = yarn_inv_freq(head_dim, base, factor, original_length, beta_fast, beta_slow)
    torch.testing.assert_close(inv_freq.float(), reference, rtol=1e-6, atol=0)
    assert attention_scale == pytest.approx(reference_scale, rel=1e-12)


def test_rope_spec_vectors():
    inv_freq = rope_inv_freq(64)
    first = [1.0, 0.7498942093324559, 0.5623413251903491, 0.4216965034285823]
    last = [3.1622776601683794e-04, 2.3713737056616554e-04, 1.7782794100389227e-04, 1.333521432163324e-04]
    torch.testing.assert_close(inv_freq[:4], torch.tensor(first, dtype=torch.float64), rtol=1e-14, atol=0)
    torch.testing.assert_close(inv_freq[-4:], torch.tensor(last, dtype=torch.float64), rtol=1e-14, atol=0)
    first32 = [1.0, 0.7498942017555237, 0.5623413324356079, 0.4216965138912201]
    assert inv_freq[:4].float().tolist() == pytest.approx(first32, rel=2e-7)


def test_pi_spec_vector():
    from ltsgen.encodings import build

    expected = [0.25, 0.18747355233311397, 0.14058533129758727, 0.10542412585714557]
    assert (rope_inv_freq(64) / 4)[:4].tolist() == pytest.approx(expected, rel=1e-14)
    assert build("rope_pi", 4, 64, factor=4.0).inv_freq[:4].tolist() == pytest.approx(expected, rel=1e-6)


def test_yarn_spec_vectors():
    inv_freq, attention_scale = yarn_inv_freq(64, 10000.0, 4.0, 512)
    assert inv_freq[:4].tolist() == pytest.approx(
        [1.0, 0.7498942093324559, 0.5623413251903491, 0.4216965034285823]
    )
    last = [7.905694150420948e-05, 5.9284342641541385e-05, 4.445698525097307e-05, 3.33380358040831e-05]
    assert inv_freq[-4:].tolist() == pytest.approx(last, rel=1e-12)
    keep = (inv_freq - rope_inv_freq(64) / 4) / (rope_inv_freq(64) * 3 / 4)  # gamma_t
    expected_keep = [1.0] * 4 + [1 - (t - 3) / 13 for t in range(4, 16)] + [0.0] * 16
    assert keep.tolist() == pytest.approx(expected_keep, abs=1e-12)
    assert attention_scale == pytest.approx(1.138629436111989, rel=1e-15)
    assert attention_scale**2 == pytest.approx(1.2964769927807063, rel=1e-15)
    correction = [64 * math.log(512 / (r * 2 * math.pi)) / (2 * math.log(10000.0)) for r in (32, 1)]
    assert correction == pytest.approx([3.2475209, 15.2887207], abs=1e-7)


def test_yarn_encoding_scales_logits_by_mscale_squared():
    from ltsgen.encodings import build

    assert build("yarn", 4, 64, factor=4.0, original_length=512).logit_scale == pytest.approx(
        1.2964769927807063
    )
    assert build("yarn", 4, 64, factor=1.0).logit_scale == 1.0


# ---- FIRE --------------------------------------------------------------------------------------------

FIRE_VECTORS = [  # (i, j), L = 512, no threshold; c = 1
    ((1, 0), 0.111076, 1.0), ((10, 0), 0.384261, 1.0), ((10, 9), 0.111076, 0.289065), ((100, 0), 0.739570, 1.0),
    ((100, 50), 0.630072, 0.851944), ((511, 0), 0.999687, 1.0), ((512, 0), 1.0, 1.0),
    ((1000, 999), 0.100329, 0.100329), ((2048, 1024), 0.909161, 0.909161), ((8192, 4096), 0.923092, 0.923092),
]  # fmt: skip


@pytest.mark.parametrize(("pair", "with_threshold", "without_threshold"), FIRE_VECTORS)
def test_fire_normalized_distance_spec_vectors(pair, with_threshold, without_threshold):
    i, j = torch.tensor(pair[0]), torch.tensor(pair[1])
    assert float(fire_normalized_distance(i, j, c=1.0, threshold=512.0)) == pytest.approx(
        with_threshold, abs=2e-6
    )
    assert float(fire_normalized_distance(i, j, c=1.0, threshold=None)) == pytest.approx(
        without_threshold, abs=2e-6
    )


def test_fire_normalized_distance_spec_vectors_at_initial_c():
    cases = {(1, 0): 0.024098, (10, 0): 0.175255, (100, 0): 0.606282, (100, 50): 0.453027,
             (2048, 1024): 0.870788, (8192, 4096): 0.896874}  # fmt: skip
    for (i, j), expected in cases.items():
        value = fire_normalized_distance(torch.tensor(i), torch.tensor(j), c=0.1, threshold=512.0)
        assert float(value) == pytest.approx(expected, abs=2e-6), (i, j)
    value = fire_normalized_distance(torch.tensor(100), torch.tensor(50), c=0.1, threshold=None)
    assert float(value) == pytest.approx(0.747222, abs=2e-6)
    zero = fire_normalized_distance(torch.tensor([0, 0]), torch.tensor([0, 0]), c=1.0, threshold=None)
    assert zero.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("threshold", [512.0, 64.0, None])
@pytest.mark.parametrize("c", [0.1, 1.0, 7.0])
def test_fire_inputs_stay_in_unit_interval_up_to_32768(threshold, c):
    for i in (0, 1, 2, 63, 64, 65, 511, 512, 513, 4096, 32767, 32768):
        j = torch.arange(i + 1)
        u = fire_normalized_distance(torch.tensor(i), j, c=c, threshold=threshold)
        assert bool(((u >= 0) & (u <= 1)).all()), (i, c, threshold)
        assert float(u[-1]) == 0.0 and bool((u.diff() <= 0).all())
        if i and (threshold is None or i >= threshold):
            assert float(u[0]) == pytest.approx(1.0, abs=1e-4)  # up to the 1e-6 in the denominator
