"""Encodings set for the training length, rescaled for evaluation by themselves, and what they learned."""

from __future__ import annotations

import pytest
import torch

from ltsgen.encodings import (
    NAMES,
    EncodingError,
    build,
    canonical_name,
    family,
    fire_normalized_distance,
    rescaled,
    rescaled_options,
    shares_weights,
    t5_relative_position_bucket,
    trained_as,
)
from ltsgen.encodings import training_options as resolve
from ltsgen.errors import LtsgenError


@pytest.mark.parametrize("train_length", [64, 128, 2048])
def test_fire_normalised_distance_spans_the_whole_range_within_the_training_length(train_length):
    options = resolve("fire", train_length)
    assert options["threshold"] == train_length / 4  # the reference's 512 for 2,048
    fire = build("fire", 4, 16, **options)
    positions = torch.arange(train_length)
    u = fire_normalized_distance(
        positions[:, None], positions[None, :], fire.c.detach(), fire.threshold.detach()
    )
    assert float(u.max()) > 0.9
    # the old default (512) left a 64-token training run below 0.5: the MLP extrapolated at evaluation
    if train_length == 64:
        old = fire_normalized_distance(positions[:, None], positions[None, :], 0.1, 512.0)
        assert float(old.max()) < 0.51


def test_t5_buckets_are_all_reached_within_the_training_length():
    options = resolve("t5", 64)
    assert options == {"num_buckets": 32, "max_distance": 64}
    buckets = t5_relative_position_bucket(torch.arange(64), **options)
    assert int(buckets.max()) == 31 and len(set(buckets.tolist())) > 24
    assert int(t5_relative_position_bucket(torch.arange(64), 32, 128).max()) < 31  # the old default: not
    assert resolve("t5", 2048)["max_distance"] == 128  # T5's own setting where it fits
    assert resolve("t5", 100)["max_distance"] == 100 and resolve("t5", 8)["max_distance"] == 17


def test_options_resolve_defaults_and_typed_overrides_in_one_line_errors():
    assert resolve("rope_pi", 64) == {"factor": 1.0, "original_length": 64, "base": 10000.0}
    assert resolve("yarn", 128, {"beta_fast": "16", "factor": "2"})["beta_fast"] == 16.0
    assert resolve("fire", 64, {"threshold": "none", "mlp_layers": "1"})["threshold"] is None
    assert resolve("fire", 64, {"share_across_layers": "true"})["share_across_layers"] is True
    assert resolve("alibi", 64) == {}
    for overrides, message in (
        (
            {"width": "3"},
            "encoding 'fire' has no option 'width' \\(did you mean 'mlp_width'\\?\\); it takes c, ",
        ),
        ({"treshold": "3"}, "no option 'treshold' \\(did you mean 'threshold'\\?\\); it takes c, "),
        ({"mlp_width": "2.5"}, "fire option mlp_width=2.5: expected a value like 32"),
        ({"share_across_layers": "3"}, "fire option share_across_layers=3: expected a value like False"),
    ):
        with pytest.raises(EncodingError, match=message) as raised:
            resolve("fire", 64, overrides)
        assert isinstance(raised.value, LtsgenError) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [  # before: built, then NaN rotations, biases or logit scales; a TypeError from torch for 2.5 buckets
        ("rope_pi", {"factor": float("nan")}, "rope_pi option factor=nan: expected a finite number"),
        ("yarn", {"factor": float("inf")}, "yarn option factor=inf: expected a finite number"),
        ("fire", {"threshold": float("nan")}, "fire option threshold=nan: expected a finite number"),
        ("t5", {"num_buckets": 2.5}, "t5 option num_buckets=2.5: expected a value like 32"),
        ("rope_pi", {"factor": -1.0}, "RoPEPI needs factor > 0 and original_length >= 1, got -1.0, 512"),
    ],
)
def test_build_checks_each_option_as_the_command_line_does(name, options, message):
    with pytest.raises(EncodingError) as raised:
        build(name, 4, 32, **options)
    assert str(raised.value) == message


def test_build_takes_numpy_and_torch_numbers_as_pythons():
    import numpy as np

    assert build("rope_pi", 4, 32, factor=np.float64(2.0), original_length=np.int64(512)).factor == 2.0
    assert build("t5", 4, 32, num_buckets=np.int64(16)).num_buckets == 16
    assert build("yarn", 4, 32, factor=torch.tensor(2.0)).factor == 2.0


def test_encoding_names_ignore_case_and_a_wrong_one_names_the_closest():
    assert [canonical_name(name) for name in ("RoPE", "rope-pi", " YaRN ", "Kerple_Log")] == [
        "rope", "rope_pi", "yarn", "kerple_log",
    ]  # fmt: skip
    assert build("ALiBi", 2, 8).slopes.shape == (2,)
    for name, hint in (("xpos", ""), ("kerple", " (did you mean 'kerple_log', 'kerple_power' or 'rope'?)")):
        with pytest.raises(EncodingError) as raised:
            canonical_name(name)
        assert str(raised.value).startswith(f"unknown encoding {name!r}{hint}; choose one of nope, rope, ")
    with pytest.raises(
        EncodingError, match="^encoding 'alibi' has no option 'treshold'; it takes no options$"
    ):
        resolve("alibi", 64, {"treshold": "64"})


def test_rope_pi_and_yarn_rescale_themselves_zero_shot():
    pi = build("rope_pi", 2, 16, **resolve("rope_pi", 64))
    trained = pi.inv_freq.clone()
    pi.set_eval_length(256)
    assert pi.factor == 4.0 and torch.allclose(pi.inv_freq, trained / 4)
    pi.set_eval_length(32)
    assert pi.factor == 1.0 and torch.equal(pi.inv_freq, trained)
    # a model fine-tuned at factor 4 keeps it up to 4x its original length, then stretches further
    tuned = build("rope_pi", 2, 16, factor=4.0, original_length=64)
    for length, factor in ((64, 4.0), (256, 4.0), (1024, 16.0)):
        tuned.set_eval_length(length)
        assert tuned.factor == factor
    yarn = build("yarn", 2, 16, **resolve("yarn", 64))
    assert yarn.logit_scale == 1.0
    yarn.set_eval_length(512)
    reference = build("yarn", 2, 16, factor=8.0, original_length=64)
    assert torch.equal(yarn.inv_freq, reference.inv_freq) and yarn.logit_scale == reference.logit_scale > 1
    positions = torch.arange(5)
    x = torch.randn(1, 2, 5, 16)
    torch.testing.assert_close(yarn.rotate(x, positions), reference.rotate(x, positions))
    assert build("alibi", 2, 16).set_eval_length(512) is None  # the others have nothing to rescale


def test_each_encoding_declares_whose_weights_it_reads_and_how_it_is_rescaled():
    assert {name: trained_as(name) for name in NAMES if trained_as(name) != name} == {
        "rope_pi": "rope",
        "yarn": "rope",
    }
    assert [name for name in NAMES if shares_weights(name)] == ["rope", "rope_pi", "yarn"]
    assert [name for name in NAMES if rescaled(name)] == ["rope_pi", "yarn"]
    families = {}
    for name in NAMES:
        families.setdefault(family(name), []).append(name)
    assert families == {  # the panels of the comparison plots
        "no position encoding": ["nope"],
        "rotary": ["rope", "rope_pi", "yarn"],
        "decaying bias": ["alibi", "kerple_log", "kerple_power", "sandwich"],
        "learned bias": ["t5", "fire"],
        "APE (ltsgen's parameterisation)": ["ape"],
    }
    assert trained_as("RoPE-PI") == "rope" and trained_as("Kerple_Log") == "kerple_log"
    # fine-tuned at 256 from a model trained at 64: the options stretch it 4x, as set_eval_length(256) would
    stretched = rescaled_options("yarn", 256, 64)
    assert stretched == {"factor": 4.0, "original_length": 64}
    tuned, zero_shot = (
        build("yarn", 2, 16, **resolve("yarn", 64, stretched)),
        build("yarn", 2, 16, **resolve("yarn", 64)),
    )
    zero_shot.set_eval_length(256)
    assert torch.equal(tuned.inv_freq, zero_shot.inv_freq) and tuned.logit_scale == zero_shot.logit_scale > 1
    assert rescaled_options("alibi", 256, 64) == {} and rescaled_options("rope", 256, 64) == {}


def test_learned_values_are_plain_numbers_per_head():
    fire = build("fire", 4, 16, threshold=16.0)
    assert fire.learned() == {"c": pytest.approx(0.1), "threshold": pytest.approx(16.0)}
    assert build("fire", 4, 16, threshold=None).learned()["threshold"] is None
    kerple = build("kerple_power", 4, 16)
    with torch.no_grad():
        kerple.shape[0] = 5.0  # stored beyond the clamp: the kernel uses 2
    learned = kerple.learned()
    assert len(learned["r1"]) == len(learned["r2"]) == 4 and learned["r2"][0] == 2.0
    ape = build("ape", 4, 16).learned()
    assert ape["linear"] == pytest.approx(
        (torch.tensor([0.25, 0.0625, 0.015625, 0.00390625]) / 4).tolist(), rel=1e-4
    )
    assert ape["log"] == pytest.approx([0.1] * 4, rel=1e-5) and ape["frequency_scale_max"] == [1.0] * 4
    assert build("rope", 4, 16).learned() == {} and build("t5", 4, 16).learned() == {}
