"""Evaluation: finite, consistent numbers (perplexity = exp(mean loss)), facts mapped to the right tokens."""

from __future__ import annotations

import math

import pytest
import torch
from test_training import tiny_config, write_tiny_dataset

from ltsgen.cli import main as ltsgen
from ltsgen.tokenizer import load_tokenizer, train_tokenizer
from ltsgen.training import evaluate_run, train
from ltsgen.training.data import DataError, _fact_positions, load_eval_sets
from ltsgen.training.evaluate import build_model, load_run

LENGTHS = [16, 64, 256]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A rope_pi run (evaluated zero-shot with a rescaled factor beyond its training length)."""
    root = tmp_path_factory.mktemp("evaluate")
    data = write_tiny_dataset(root / "lts")
    train(tiny_config(data, root / "run", "rope_pi", steps=6), progress=False)
    return data, root / "run"


def test_numbers_are_finite_and_consistent(trained):
    data, run = trained
    report = evaluate_run(run, data, LENGTHS, max_sequences=5, progress=False)
    model_config, weights, config, tokenizer = load_run(run)
    sets = load_eval_sets(data, LENGTHS, tokenizer, 5)
    assert [r["eval_length"] for r in report["results"]] == LENGTHS
    for result in report["results"]:
        length, count = result["eval_length"], result["num_sequences"]
        assert count == 5 and result["tokens"] == count * (length - 1)
        assert result["perplexity"] == pytest.approx(math.exp(result["loss"]), rel=1e-12)
        # the same mean loss from the model's own loss on the same sequences
        model = build_model(model_config, weights, torch.device("cpu"), length)
        tokens = sets[length].input_ids
        with torch.no_grad():
            _, loss = model(tokens[:, :-1], tokens[:, 1:])
        assert result["loss"] == pytest.approx(float(loss), rel=1e-5)
        curve = result["per_position"]
        assert len(curve["loss"]) == min(128, length - 1) and all(map(math.isfinite, curve["loss"]))
        assert 0 < result["attention_entropy"] < math.log(length)
        assert len(result["attention_entropy_per_layer"]) == 2
        assert result["peak_memory_mib"] >= 0 and result["seconds"] > 0
    facts = report["results"][-1]["facts"]
    assert facts and all(math.isfinite(f["loss"]) and f["tokens"] > 0 for f in facts)
    assert sum(f["tokens"] for f in facts) == sum(len(p) for p in sets[256].facts)


def test_rope_pi_is_rescaled_only_beyond_its_training_length(trained):
    _, run = trained
    model_config, weights, _, _ = load_run(run)
    assert model_config["encoding_options"] == {"factor": 1.0, "original_length": 32}
    factor = [
        build_model(model_config, weights, torch.device("cpu"), n).blocks[0].attn.encoding.factor
        for n in (32, 256)
    ]
    assert factor == [1.0, 8.0]


def test_fact_positions_point_at_the_value_tokens(trained):
    data, run = trained
    tokenizer = load_tokenizer(run / "tokenizer.json")
    sets = load_eval_sets(data, [256], tokenizer, 5)
    assert any(sets[256].facts)
    for row, positions in zip(sets[256].input_ids, sets[256].facts, strict=True):
        for position, distance in positions:
            piece = tokenizer.decode([int(row[position])]).strip()
            assert piece and any(piece in name for name in ("Bobo", "Lulu", "Tiki", "Momo", "Pip"))
            assert distance > 0 and tokenizer.decode([int(row[position - distance])]).strip()


def test_fact_mapping_by_hand():
    tokenizer = train_tokenizer(
        ["a cat named Bobo sat. Then Bobo ran far away from home."] * 20, vocab_size=300
    )
    text = "a cat named Bobo sat. Then Bobo ran."
    record = {
        "meta": {"facts": [{"value": "Bobo", "first": text.index("Bobo"), "uses": [text.rindex("Bobo")]}]}
    }
    encoding = tokenizer.encode(text)
    positions = _fact_positions(record, encoding.offsets, len(encoding.ids))
    first = next(i for i, (lo, hi) in enumerate(encoding.offsets) if lo <= text.index("Bobo") < hi)
    used = [
        i
        for i, (lo, hi) in enumerate(encoding.offsets)
        if lo < text.rindex("Bobo") + 4 and hi > text.rindex("Bobo")
    ]
    assert positions == [(i, i - first) for i in used]
    assert "".join(tokenizer.decode([encoding.ids[i]]) for i in used).strip() == "Bobo"
    assert _fact_positions(record, encoding.offsets, used[0]) == []  # beyond the limit: left out


def test_bucketed_corpora_use_their_exact_length_sets(tmp_path):
    tokenizer = train_tokenizer(
        (f"story {i} about a dog and a cat in the park" for i in range(200)), vocab_size=300
    )
    data = write_tiny_dataset(tmp_path / "buckets", tokenizer=tokenizer, eval_lengths=(16, 64))
    train(tiny_config(data, tmp_path / "run", "alibi", steps=2), progress=False)
    assert (tmp_path / "run" / "tokenizer.json").read_bytes() == (data / "tokenizer.json").read_bytes()
    report = evaluate_run(tmp_path / "run", data, [16, 64, 100], max_sequences=4, progress=False)
    by_length = {r["eval_length"]: r for r in report["results"]}
    assert by_length[16]["description"].startswith("eval/16:") and by_length[16]["num_sequences"] == 4
    assert by_length[64]["description"].startswith("eval/64:")
    assert by_length[100]["description"].startswith("validation split")  # no stored set: prefixes instead
    other = train_tokenizer(["other text entirely"] * 50, vocab_size=280)
    other.save(str(tmp_path / "other.json"))
    with pytest.raises(DataError, match="tokenized with another tokenizer"):
        train(tiny_config(data, tmp_path / "run2", tokenizer=str(tmp_path / "other.json")), progress=False)


def test_evaluate_cli(trained, tmp_path, capsys):
    data, run = trained
    assert (
        ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--lengths", "16,32", "--no-progress"])
        == 0
    )
    out = capsys.readouterr().out
    assert "rope_pi trained at 32 tokens" in out and "eval.json" in out
    assert ltsgen(["evaluate", "--run", str(tmp_path / "nothing"), "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "config.json: not found" in err
    assert ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--lengths", "16,x"]) == 2
    assert "comma-separated integers" in capsys.readouterr().err
