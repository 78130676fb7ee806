"""Every encoding inside the compact model: causality, long inputs, chunked evaluation, gradients, entropy."""

from __future__ import annotations

import math

import pytest
import torch

from ltsgen.encodings import NAMES
from ltsgen.training import KVCache, ModelConfig, TransformerLM

TRAIN_LENGTH = 32
VOCAB = 64
CASES = [(name, {}) for name in NAMES] + [
    ("rope_pi", {"factor": 8.0, "original_length": TRAIN_LENGTH}),
    ("yarn", {"factor": 8.0, "original_length": TRAIN_LENGTH}),
    ("fire", {"threshold": 16.0}),  # rows past the threshold take the per-pair path
    ("fire", {"threshold": None}),
    ("fire", {"share_across_layers": True}),
]
IDS = [name + "".join(f"-{k}={v}" for k, v in options.items()) for name, options in CASES]


def tiny_model(name: str, **options) -> TransformerLM:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, encoding=name, **options)
    model = TransformerLM(config)
    return model


def tokens(length: int, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_causal_and_chunked_evaluation_equals_full_pass(name, options):
    model = tiny_model(name, **options)
    ids = tokens(3 * TRAIN_LENGTH)
    with torch.no_grad():
        full = model(ids)
        changed = ids.clone()
        changed[:, 50] = (changed[:, 50] + 1) % VOCAB
        after_change = model(changed)
        cache = KVCache(model.config.n_layers)
        chunks = [model(ids[:, a:b], cache=cache) for a, b in ((0, 37), (37, 38), (38, 80), (80, 96))]
        model.block_elements = 2 * 4 * 96 * 7  # attention in blocks of 7 query rows
        blocked = model(ids)
    torch.testing.assert_close(after_change[:, :50], full[:, :50], rtol=0, atol=1e-6)
    assert float((after_change[:, 50] - full[:, 50]).abs().max()) > 1e-3
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(blocked, full, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_logits_stay_finite_at_eight_times_the_training_length(name, options):
    model = tiny_model(name, **options)
    with torch.no_grad():
        logits = model(tokens(8 * TRAIN_LENGTH, batch=1))
    assert logits.shape == (1, 8 * TRAIN_LENGTH, VOCAB)
    assert bool(torch.isfinite(logits).all())


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_gradients_reach_every_learnable_parameter(name, options):
    model = tiny_model(name, **options)
    ids = tokens(129, batch=1)  # distances up to 127 reach every T5 bucket
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    for parameter_name, parameter in model.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert bool(torch.isfinite(parameter.grad).all()), parameter_name
        # every entry of the per-head parameters moves; a whole tensor elsewhere (ReLU units may be idle)
        per_head = ".encoding." in parameter_name and ".mlp." not in parameter_name
        assert bool((parameter.grad != 0).all() if per_head else parameter.grad.any()), parameter_name
    encoding_parameters = {n.split(".encoding.")[1] for n, _ in model.named_parameters() if ".encoding." in n}
    expected = {
        "kerple_log": {"scale", "shape"},
        "kerple_power": {"scale", "shape"},
        "t5": {"table"},
        "ape": {"log_frequency_scale", "linear", "log", "sqrt"},
        "fire": {
            "c",
            "mlp.0.weight",
            "mlp.0.bias",
            "mlp.2.weight",
            "mlp.2.bias",
            "mlp.4.weight",
            "mlp.4.bias",
        }
        | (set() if options.get("threshold", 512.0) is None else {"threshold_multiplier"}),
    }
    assert encoding_parameters == expected.get(name, set())


def test_fire_inputs_stay_in_unit_interval_up_to_32768(monkeypatch):
    import ltsgen.encodings.fire as fire_module

    seen = []
    real = fire_module.fire_normalized_distance

    def recording(*args):  # a spy: records what the module feeds its MLP, computes the real value
        seen.append(real(*args).detach().flatten())
        return real(*args)

    monkeypatch.setattr(fire_module, "fire_normalized_distance", recording)
    torch.manual_seed(0)
    for threshold in (512.0, None):
        fire = (
            TransformerLM(ModelConfig(VOCAB, 32, 1, 4, encoding="fire", threshold=threshold))
            .blocks[0]
            .attn.encoding
        )
        hook = fire.mlp[0].register_forward_hook(
            lambda module, args, out: seen.append(args[0].detach().flatten())
        )
        with torch.no_grad():
            for queries in (torch.arange(0, 600, 7), torch.tensor([32760, 32768])):
                fire.bias(queries, torch.arange(int(queries.max()) + 1))
        hook.remove()
    inputs = torch.cat(seen)
    assert inputs.numel() > 4 * 32768
    assert float(inputs.min()) >= 0.0 and float(inputs.max()) <= 1.0
    assert float(inputs.max()) > 0.99  # the range is used, not just a corner of it


def uniform_attention_entropy(length: int) -> float:
    """Mean over query positions i of log(i + 1): the entropy of attention spread evenly over the past."""
    return sum(math.log(i + 1) for i in range(length)) / length


def test_ape_attention_entropy_at_4096_is_finite_and_bounded():
    model = tiny_model("ape")
    ids = tokens(4096, batch=1)
    long, short = model.attention_entropy(ids), model.attention_entropy(ids[:, :1024])
    assert long.shape == (2, 4)
    assert bool(torch.isfinite(long).all())
    assert float(long.max()) < math.log(4096)
    # the decay keeps the softmax normaliser convergent: entropy grows far less than evenly spread attention
    growth = uniform_attention_entropy(4096) - uniform_attention_entropy(1024)
    assert float((long - short).max()) < 0.6 * growth
