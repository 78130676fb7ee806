"""Bias values of each encoding module against the formulas and test vectors of the spec."""

from __future__ import annotations

import math

import pytest
import torch

from ltsgen.encodings import NAMES, PositionEncoding, alibi_slopes, build, options

DISTANCES = [0, 1, 2, 10, 100, 1000]


def bias_at(encoding: PositionEncoding, distances: list[int]) -> torch.Tensor:
    """Bias [H, len(distances)] of the last query (position max) against keys at the given distances."""
    last = max(distances)
    values = encoding.bias(torch.tensor([last]), torch.arange(last + 1))[:, 0]
    return values[:, [last - n for n in distances]]


def test_names_and_interface():
    assert NAMES == ("nope", "rope", "rope_pi", "yarn", "alibi", "kerple_log", "kerple_power", "t5",
                     "sandwich", "fire", "ape")  # fmt: skip
    for name in NAMES:
        encoding = build(name, num_heads=4, head_dim=16)
        assert isinstance(encoding, PositionEncoding) and isinstance(encoding, torch.nn.Module)
        shared = name not in ("fire", "ape")
        assert encoding.shared_across_layers is shared, name
    assert build("fire", 4, 16, share_across_layers=True).shared_across_layers is True


def test_build_rejects_unknown_names_and_options():
    with pytest.raises(ValueError, match="unknown encoding 'xpos'"):
        build("xpos", 4, 16)
    with pytest.raises(ValueError, match="encoding 'rope' has no option 'factor'"):
        build("rope", 4, 16, factor=2.0)
    with pytest.raises(ValueError, match="even head_dim"):
        build("rope", 4, 15)
    assert options("fire") == {"threshold": 512.0, "c": 0.1, "mlp_width": 32, "mlp_layers": 2,
                               "share_across_layers": False}  # fmt: skip
    assert options("yarn")["factor"] == 4.0 and options("yarn")["original_length"] == 512
    assert options("rope") == {"base": 10000.0}


def test_nope_and_rotary_have_no_bias():
    positions = torch.arange(5)
    for name in ("nope", "rope", "rope_pi", "yarn"):
        assert build(name, 2, 8).bias(positions, positions) is None
    x = torch.randn(1, 2, 5, 8)
    assert build("nope", 2, 8).rotate(x, positions) is x


def test_rope_rotation_is_relative_and_matches_rotate_half_convention():
    rope = build("rope", 1, 8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)
    pairs = [(5, 2), (105, 102), (3005, 3002)]
    dots = [
        float((rope.rotate(q, torch.tensor([i])) * rope.rotate(k, torch.tensor([j]))).sum()) for i, j in pairs
    ]
    assert dots == pytest.approx([dots[0]] * 3, abs=1e-4)
    # rotate_half convention: dimension t pairs with t + d/2, angle = position * inv_freq[t]
    x = torch.zeros(1, 1, 1, 8)
    x[..., 1] = 1.0
    rotated = rope.rotate(x, torch.tensor([3]))[0, 0, 0]
    angle = 3 * rope.inv_freq[1]
    assert rotated[1] == pytest.approx(math.cos(angle), abs=1e-6)
    assert rotated[5] == pytest.approx(math.sin(angle), abs=1e-6)


def test_pi_rotates_position_m_as_rope_rotates_m_over_factor():
    rope, pi = build("rope", 2, 16), build("rope_pi", 2, 16, factor=4.0)
    x = torch.randn(1, 2, 3, 16)
    torch.testing.assert_close(
        pi.rotate(x, torch.tensor([0, 8, 400])), rope.rotate(x, torch.tensor([0, 2, 100]))
    )


def test_alibi_bias_is_minus_slope_times_distance():
    values = bias_at(build("alibi", 6, 8), DISTANCES)
    expected = -alibi_slopes(6).float()[:, None] * torch.tensor(DISTANCES, dtype=torch.float32)
    torch.testing.assert_close(values, expected)


def test_sandwich_spec_vectors():
    values = bias_at(build("sandwich", 8, 64), DISTANCES)
    head_1 = [0, -0.623471, -2.279991, -9.1093, -13.9877, -22.641408]
    head_8 = [0, -0.077934, -0.284999, -1.138663, -1.748463, -2.830176]
    assert values[0].tolist() == pytest.approx(head_1, abs=2e-5)
    assert values[1].tolist() == pytest.approx([v / 2 for v in head_1], abs=2e-5)
    assert values[7].tolist() == pytest.approx(head_8, abs=2e-6)
    assert bool((values <= 0).all())
    assert build("sandwich", 8, 16, dim=64).dim == 64


def test_kerple_spec_vectors_and_initialisation():
    torch.manual_seed(0)
    log, power = build("kerple_log", 4, 8), build("kerple_power", 4, 8)
    assert float(log.scale.detach().max()) <= 2 and float(log.shape.detach().max()) <= 1
    assert float(power.scale.detach().max()) <= 1 and float(power.shape.detach().max()) <= 2
    with torch.no_grad():
        log.scale.fill_(1.0)
        log.shape.fill_(1.0)
        power.scale.fill_(1.0)
        power.shape.fill_(0.5)
    distances = [0, 1, 10, 100, 1000]
    assert bias_at(log, distances)[0].tolist() == pytest.approx(
        [0, -0.693147, -2.397895, -4.615121, -6.908755], abs=1e-5
    )
    assert bias_at(power, distances)[2].tolist() == pytest.approx(
        [0, -1, -3.162278, -10, -31.622777], abs=1e-4
    )
    with torch.no_grad():  # values below 0.01 act as 0.01, exponents above 2 as 2
        log.shape.fill_(-3.0)
        power.shape.fill_(5.0)
    assert bias_at(log, [10])[0].tolist() == pytest.approx([-math.log1p(0.1)], rel=1e-5)
    assert bias_at(power, [10])[0].tolist() == pytest.approx([-100.0], rel=1e-5)


def test_t5_bias_looks_up_the_bucket_of_each_distance():
    t5 = build("t5", 3, 8)
    values = bias_at(t5, [0, 5, 16, 20, 50, 100, 127, 500])
    buckets = [0, 5, 16, 17, 24, 30, 31, 31]
    torch.testing.assert_close(values, t5.table[buckets].T.detach())


@pytest.mark.parametrize("mlp_layers", [1, 2, 3])
def test_fire_bias_and_its_gradients_are_the_mlp_of_the_normalised_distance(mlp_layers):
    from ltsgen.encodings import fire_normalized_distance

    torch.manual_seed(mlp_layers)
    fire = build("fire", 4, 8, threshold=16.0, mlp_layers=mlp_layers)
    q, k = torch.tensor([3, 15, 17, 40, 41, 90]), torch.arange(91)  # below and past the threshold
    causal = k[None, :] <= q[:, None]
    bias = fire.bias(q, k)[:, causal]
    u = fire_normalized_distance(q[:, None], k[None, :], fire.c, fire.threshold)
    expected = fire.mlp(u[..., None]).permute(2, 0, 1)[:, causal]
    torch.testing.assert_close(bias, expected, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(bias)
    ours = torch.autograd.grad((bias * weights).sum(), list(fire.parameters()))
    reference = torch.autograd.grad((expected * weights).sum(), list(fire.parameters()))
    for (name, _), a, b in zip(fire.named_parameters(), ours, reference, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=name)
    widths = [m.out_features for m in fire.mlp if isinstance(m, torch.nn.Linear)]
    assert widths == [32] * mlp_layers + [4]
    assert float(fire.c.detach()) == pytest.approx(0.1) and float(fire.threshold.detach()) == pytest.approx(
        16.0
    )


def test_fire_knots_bound_linear_pieces_of_the_mlp():
    torch.manual_seed(0)
    fire = build("fire", 2, 8)
    with torch.no_grad():
        points, values = fire.knots()
        middle_values = fire.mlp(((points[:-1] + points[1:]) / 2)[:, None]).T
    assert float(points[0]) == 0.0 and float(points[-1]) == 1.0 and bool((points.diff() >= 0).all())
    # linear between knots: the MLP at each midpoint is the mean of its values at the two ends
    torch.testing.assert_close(middle_values, (values[:, :-1] + values[:, 1:]) / 2, rtol=1e-5, atol=1e-6)
    assert points.numel() > 3  # the random MLP does bend inside [0, 1]


def test_ape_initialisation_and_decay():
    ape = build("ape", 4, 16)
    values = bias_at(ape, [0, 1, 9, 100])
    n = torch.tensor([0.0, 1.0, 9.0, 100.0])
    a = alibi_slopes(4).float()[:, None] / 4
    expected = -(a * n + 0.1 * torch.log1p(n) + 0.1 * n.sqrt())
    torch.testing.assert_close(values, expected.expand_as(values), rtol=1e-5, atol=1e-6)
    x = torch.randn(1, 4, 6, 16)
    positions = torch.arange(6)
    torch.testing.assert_close(ape.rotate(x, positions), build("rope", 4, 16).rotate(x, positions))


def test_distance_bias_accepts_any_query_order_and_offset():
    alibi = build("alibi", 2, 8)
    q, k = torch.tensor([9, 3, 12]), torch.arange(4, 14)
    expected = -alibi.slopes[:, None, None] * (q[:, None] - k[None, :]).clamp(min=0)
    torch.testing.assert_close(alibi.bias(q, k), expected)
    with pytest.raises(ValueError, match="consecutive"):
        alibi.bias(q, torch.tensor([0, 2, 3]))
