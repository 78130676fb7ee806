"""Evaluation: finite, consistent numbers (perplexity = exp(mean loss)), cued recalls scored on the right tokens."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from training_fixtures import tiny_config, tiny_story, write_tiny_dataset

from ltsgen.cli import main as ltsgen
from ltsgen.loaders.contract import read_manifest
from ltsgen.tokenizer import eos_id, load_tokenizer, train_tokenizer
from ltsgen.training import evaluate_run, train
from ltsgen.training.data import load_eval_sets
from ltsgen.training.errors import TrainingError
from ltsgen.training.evaluate import build_model, evaluate_length, load_run

LENGTHS = [16, 64, 256]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A rope_pi run (evaluated zero-shot with a rescaled factor beyond its training length)."""
    root = tmp_path_factory.mktemp("evaluate")
    data = write_tiny_dataset(root / "lts")
    train(
        tiny_config(data, root / "run", "rope_pi", steps=6), progress=False, train_tokenizer=train_tokenizer
    )
    return data, root / "run"


def test_numbers_are_finite_and_consistent(trained):
    data, run = trained
    report = evaluate_run(run, data, LENGTHS, max_sequences=5, progress=False)
    model_config, weights, config, tokenizer = load_run(run)
    sets = load_eval_sets(data, LENGTHS, tokenizer, 5).sets
    assert [r["eval_length"] for r in report["results"]] == LENGTHS
    model = build_model(model_config, weights, torch.device("cpu"))
    for result in report["results"]:
        length, count = result["eval_length"], result["num_sequences"]
        assert count == 5 and result["tokens"] == count * (length - 1)
        assert result["perplexity"] == pytest.approx(math.exp(result["loss"]), rel=1e-12)
        # the same mean loss from the model's own loss on the same sequences
        model.set_eval_length(length)
        tokens = sets[length].input_ids
        with torch.no_grad():
            _, loss = model(tokens[:, :-1], tokens[:, 1:])
        assert result["loss"] == pytest.approx(float(loss), rel=1e-5)
        curve = result["per_position"]
        assert len(curve["loss"]) == min(128, length - 1) and all(map(math.isfinite, curve["loss"]))
        assert 0 < result["attention_entropy"] < math.log(length)
        assert 0 < result["attention_entropy_last"] < math.log(length)
        if length <= 32:  # the last 32 queries are all of them
            assert result["attention_entropy_last"] == pytest.approx(result["attention_entropy"], rel=1e-6)
        assert len(result["attention_entropy_per_layer"]) == 2
        assert result["peak_memory_mib"] >= 0 and result["seconds"] > 0
    longest, recalls = report["results"][-1], sets[256].recalls
    assert longest["recall_count"] == len(recalls.recalls) > 0 and longest["recall_without_control"] == 0
    assert sum(b["count"] for b in longest["recalls"]) == longest["recall_count"]
    # the same scores from the model's own top-1 predictions, value token by value token
    with torch.no_grad():
        predicted = model(sets[256].input_ids[:, :-1]).argmax(-1)
        predicted_control = model(recalls.control_ids[:, :-1]).argmax(-1)
    ids, control_ids = sets[256].input_ids, recalls.control_ids
    hits = [
        all(predicted[r.row, p - 1] == ids[r.row, p] for p in range(r.start, r.end)) for r in recalls.recalls
    ]
    controls = [all(predicted_control[r.control_row, p - 1] == control_ids[r.control_row, p]
                    for p in range(r.control_start, r.control_end)) for r in recalls.recalls]  # fmt: skip
    assert longest["recall_accuracy"] == sum(hits) / len(hits)
    assert longest["recall_accuracy_control"] == sum(controls) / len(controls)
    first = report["results"][0]  # 16 tokens: no value is recalled that soon
    assert first["recall_count"] == 0 and first["recall_accuracy"] is None
    # each recall in its own 32-token window (the training length), with its earlier occurrence inside it
    inside = [
        r
        for r in recalls.recalls
        if r.end >= 32 and r.control_end >= 32 and r.start - r.distance >= r.end - 32
    ]
    window, hits = report["recall_window"], []
    assert window["recall_count"] == len(inside) > 0
    model.set_eval_length(32)
    for r in inside:
        tokens = ids[r.row, r.end - 32 : r.end]
        with torch.no_grad():
            predicted = model(tokens[None, :-1]).argmax(-1)[0]
        hits.append(all(predicted[p - 1] == tokens[p] for p in range(r.start - r.end + 32, 32)))
    assert window["recall_accuracy"] == sum(hits) / len(hits)


def test_the_penalty_scores_the_same_last_tokens_with_full_context_and_with_a_window(trained):
    data, run = trained
    report = evaluate_run(run, data, [16, 32, 100], max_sequences=3, progress=False)
    model_config, weights, _, tokenizer = load_run(run)
    sets = load_eval_sets(data, [16, 32, 100], tokenizer, 3).sets
    model = build_model(model_config, weights, torch.device("cpu"))
    for result in report["results"][:2]:  # L <= T = 32: the window is the whole context
        assert (
            result["extrapolation_penalty"] == 0.0
            and result["per_document"]["extrapolation_penalty"] == [0.0] * 3
        )
        assert result["same_token_positions"] == result["eval_length"] - 1
    far = report["results"][2]
    assert far["same_token_positions"] == 32  # the last T tokens: 68..99
    tokens = sets[100].input_ids
    full, window = [], []
    with torch.no_grad():
        model.set_eval_length(100)
        logits = model(tokens[:, :-1])
        full = F.cross_entropy(logits[:, 67:].transpose(1, 2), tokens[:, 68:], reduction="none").mean(1)
        model.set_eval_length(32)  # rope_pi read at its training scale: the context it was trained with
        for j in range(68, 100):
            window.append(
                F.cross_entropy(model(tokens[:, j - 32 : j])[:, -1], tokens[:, j], reduction="none")
            )
    window = torch.stack(window, dim=1).mean(1)
    assert far["per_document"]["same_token_loss_full"] == pytest.approx(full.tolist(), rel=1e-5)
    assert far["per_document"]["same_token_loss_window"] == pytest.approx(window.tolist(), rel=1e-5)
    assert far["extrapolation_penalty"] == pytest.approx(float((full - window).mean()), abs=1e-5)
    # the unigram baseline: fitted on every token of the 100-token sequences, scored on the same targets
    counts = torch.bincount(tokens.flatten()).double()
    expected = -(counts / counts.sum()).log()[tokens[:, 68:].flatten()].mean()
    assert far["unigram_loss"] == pytest.approx(float(expected), rel=1e-12)
    assert far["entropy_sequences"] == 3 and len(far["per_document"]["attention_entropy_last"]) == 3
    strided = evaluate_run(run, data, [100], max_sequences=3, window_stride=8, progress=False)["results"][0]
    assert strided["same_token_positions"] == 4  # 99, 91, 83, 75
    with pytest.raises(TrainingError, match="--window-stride must be at least 1"):
        evaluate_run(run, data, [100], max_sequences=3, window_stride=0, progress=False)


@pytest.mark.parametrize("encoding", ["rope_pi", "yarn"])
def test_between_t_and_2t_a_token_with_less_than_t_before_it_is_read_at_the_training_scale(encoding):
    """Before, such a token's window loss was its full-context one, read at factor L / T: its penalty was 0
    by construction, not the gap between the two scales."""
    from ltsgen.training.data import EvalSet
    from ltsgen.training.model import ModelConfig, TransformerLM

    torch.manual_seed(0)
    train_length, length = 8, 12
    model = TransformerLM(ModelConfig(vocab_size=20, d_model=12, n_layers=2, n_heads=3, encoding=encoding,
                                      factor=1.0, original_length=train_length)).eval()  # trained at factor 1  # fmt: skip
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)  # far from the init: the scales read apart
    tokens = torch.randint(0, 20, (3, length))
    result = evaluate_length(model, EvalSet(length, tokens, ["a", "b", "c"], None), torch.device("cpu"),
                             train_length=train_length, batch_tokens=50, entropy_sequences=None, dtype="float32")  # fmt: skip
    with torch.no_grad():
        model.set_eval_length(train_length)
        window = torch.stack([F.cross_entropy(model(tokens[:, max(0, j - train_length) : j])[:, -1], tokens[:, j],
                                              reduction="none") for j in range(length - train_length, length)], 1)  # fmt: skip
        model.set_eval_length(length)
        full = F.cross_entropy(model(tokens[:, :-1]).transpose(1, 2), tokens[:, 1:], reduction="none")[:, 3:]
    assert result["per_document"]["same_token_loss_window"] == pytest.approx(
        window.mean(1).tolist(), rel=1e-5
    )
    assert result["per_document"]["same_token_loss_full"] == pytest.approx(full.mean(1).tolist(), rel=1e-5)
    assert (full[:, :4] - window[:, :4]).abs().mean() > 1e-2  # the near tokens read apart at the two scales


def test_every_length_reads_the_same_documents_nested(trained):
    data, run = trained
    report = evaluate_run(run, data, [16, 64, 256], max_sequences=4, progress=False)
    tokenizer = load_tokenizer(run / "tokenizer.json")
    found = load_eval_sets(data, [16, 64, 256], tokenizer, 4)
    documents = [r["documents"] for r in report["results"]]
    assert documents[0] == documents[1] == documents[2] == found.documents and len(set(documents[0])) == 4
    longest = found.sets[256].input_ids
    for length in (16, 64):
        assert torch.equal(found.sets[length].input_ids, longest[:, :length])
        short, long = found.sets[length].recalls, found.sets[256].recalls
        assert [(r.row, r.start, r.end, r.distance) for r in short.recalls] == [
            (r.row, r.start, r.end, r.distance)
            for r in long.recalls
            if r.end <= length and r.control_end <= length
        ]
    # the documents are the first validation stories (stored order) that reach 256 tokens
    reaching = [
        f"tiny-{i:05d}"
        for i in range(40, 52)
        if len(tokenizer.encode(tiny_story(i, 100 + (i * 37) % 300)["text"]).ids) >= 256
    ]
    assert documents[0] == reaching[:4]
    assert report["notice"] is None
    # a run read at fewer lengths (a comparison's fine-tune) reads the same documents as the others, with the
    # same unigram baseline: before, it took the first documents reaching its own longest length, and fitted
    # the unigram on them, so its values paired with other documents than the other runs'
    full = evaluate_run(run, data, [64, 400], max_sequences=4, progress=False)["results"][0]
    alone = evaluate_run(run, data, [64], max_sequences=4, documents_length=400, progress=False)
    assert full["documents"] == ["tiny-00040", "tiny-00042", "tiny-00043", "tiny-00044"]
    assert alone["documents_length"] == 400 and [r["eval_length"] for r in alone["results"]] == [64]
    for key in ("documents", "unigram_loss", "same_token_loss_window", "per_document"):
        assert alone["results"][0][key] == full[key]
    assert (
        evaluate_run(run, data, [64], max_sequences=4, progress=False)["results"][0]["documents"]
        == reaching[:4]
    )


def test_fewer_long_documents_than_asked_is_said_and_too_few_is_an_error(trained, capsys):
    data, run = trained
    tokenizer = load_tokenizer(run / "tokenizer.json")
    sizes = [len(tokenizer.encode(tiny_story(i, 100 + (i * 37) % 300)["text"]).ids) for i in range(40, 52)]
    reaching = sum(size >= 600 for size in sizes)
    assert 6 <= reaching < 12  # the premise: some, not all, validation stories reach 600 tokens
    lines = []
    report = evaluate_run(run, data, [16, 600], max_sequences=12, progress=False, log=lines.append)
    assert [r["num_sequences"] for r in report["results"]] == [reaching, reaching]
    assert lines == [f"{run}: only {reaching} of the 12 requested documents reach 600 tokens; every length is "
                     f"evaluated on these {reaching}"]  # fmt: skip
    assert report["notice"] in lines[0]
    too_long = max(sizes) + 1
    assert ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", f"16,{too_long}",
                   "--eval-sequences", "4", "--no-progress"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert (
        f"validation: 0 of 12 documents reach {too_long} tokens" in err and "test: not in the dataset" in err
    )


def test_rope_pi_is_rescaled_only_beyond_its_training_length(trained):
    _, run = trained
    model_config, weights, _, _ = load_run(run)
    assert model_config["encoding_options"] == {"factor": 1.0, "original_length": 32, "base": 10000.0}
    model = build_model(model_config, weights, torch.device("cpu"))
    factors = []
    for length in (32, 256, 16):
        model.set_eval_length(length)
        factors.append(model.blocks[0].attn.encoding.factor)
    assert factors == [1.0, 8.0, 1.0]


def test_recalls_point_at_the_value_and_their_controls_hide_it(trained):
    data, run = trained
    tokenizer = load_tokenizer(run / "tokenizer.json")
    found = load_eval_sets(data, [256], tokenizer, 5).sets[256]
    names = ("Bobo", "Lulu", "Tiki", "Momo", "Pip")
    assert found.recalls.recalls
    for recall in found.recalls.recalls:
        row, control = found.input_ids[recall.row], found.recalls.control_ids[recall.control_row]
        value = tokenizer.decode(row[recall.start : recall.end].tolist()).strip(" .")
        assert value in names
        assert (
            control[recall.control_start : recall.control_end].tolist()
            == row[recall.start : recall.end].tolist()
        )
        before, context = (
            tokenizer.decode(row[: recall.start].tolist()),
            tokenizer.decode(control[: recall.control_start].tolist()),
        )
        assert value in before.split() or f"{value}." in before.split()
        assert not re.search(rf"\b{value}\b", context)  # the control's context no longer holds the value
        others = {n for n in names if re.search(rf"\b{n}\b", context)}
        assert len(others) == 1  # ... but another pet name in its place
        earlier = tokenizer.decode(
            row[recall.start - recall.distance : recall.start - recall.distance + 4].tolist()
        )
        assert earlier.strip().startswith(
            value
        )  # the distance goes back to the value's nearest earlier occurrence


def test_a_record_that_breaks_the_cue_contract_is_one_line(trained, tmp_path, capsys):
    def broken(index: int, words: int) -> dict:
        record = tiny_story(index, words)
        if index == 45:
            record["meta"]["facts"][0]["cues"].pop()
        return record

    data = write_tiny_dataset(tmp_path / "broken", story=broken)
    _, run = trained
    assert ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", "64",
                   "--eval-sequences", "12", "--no-progress"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{data}/validation: record tiny-00045: meta facts[0] ('pet name') has 2 cues for 3 uses" in err


def test_bucketed_corpora_use_their_exact_length_sets(trained, tmp_path, capsys):
    tokenizer = train_tokenizer(
        (f"story {i} about a dog and a cat in the park" for i in range(200)), vocab_size=300
    )
    data = write_tiny_dataset(tmp_path / "buckets", tokenizer=tokenizer, eval_lengths=(16, 64))
    train(tiny_config(data, tmp_path / "run", "alibi", steps=2), progress=False)
    assert (tmp_path / "run" / "tokenizer.json").read_bytes() == (data / "tokenizer.json").read_bytes()
    report = evaluate_run(tmp_path / "run", data, [16, 64], max_sequences=4, progress=False)
    assert report["documents_from"].startswith("the stored exact-length sets eval/<L>")
    stored = [
        f"tiny-{i:05d}"
        for i in range(40, 52)
        if len(tokenizer.encode(tiny_story(i, 100 + (i * 37) % 300)["text"]).ids) >= 64
    ]
    assert [r["documents"] for r in report["results"]] == [stored[:4], stored[:4]]  # eval/16's first 4 differ
    mixed = evaluate_run(tmp_path / "run", data, [16, 64, 100], max_sequences=4, progress=False)
    assert mixed["documents_from"].startswith(
        "the validation split"
    )  # no stored set at 100: prefixes for all
    assert len({tuple(r["documents"]) for r in mixed["results"]}) == 1
    # the concatenated stream: the first windows at the longest length, each cut to every length
    concat = evaluate_run(tmp_path / "run", data, [16, 64], max_sequences=3, eval_concat=True, progress=False)
    assert concat["documents_from"].startswith("the concatenated held-out stream eval_concat/64: its first 3")
    sets = load_eval_sets(data, [16, 64], tokenizer, 3, concat=True).sets
    stream = [
        t
        for i in range(40, 52)
        for t in [*tokenizer.encode(tiny_story(i, 100 + (i * 37) % 300)["text"]).ids, eos_id(tokenizer)]
    ]
    assert sets[64].input_ids.tolist() == [stream[i * 64 : (i + 1) * 64] for i in range(3)]
    assert torch.equal(sets[16].input_ids, sets[64].input_ids[:, :16])
    with pytest.raises(TrainingError, match=r"eval_concat/100: not in the dataset"):
        load_eval_sets(data, [16, 100], tokenizer, 3, concat=True)
    concat_shards = read_manifest(data).splits["eval_concat"]
    windows = sum(shard.samples for shard in concat_shards if shard.bucket == "64")
    fewer = load_eval_sets(data, [64], tokenizer, windows + 1, concat=True)
    assert fewer.notice == (  # before: "documents reach 64 tokens", of windows the build cut as it was told
        f"only {windows} of the {windows + 1} requested windows: the build cut {windows} of 64 tokens (its "
        f"--eval-sequences); every length is evaluated on these {windows}"
    )
    from ltsgen.training.report import _evaluated_on

    assert "window i of the concatenated held-out stream" in _evaluated_on({"eval_concat": True})
    assert "the first L tokens of document i" in _evaluated_on({"eval_concat": False})
    other = train_tokenizer(["other text entirely"] * 50, vocab_size=280)
    other.save(str(tmp_path / "other.json"))
    with pytest.raises(TrainingError, match="tokenized with another tokenizer"):
        train(tiny_config(data, tmp_path / "run2", tokenizer=str(tmp_path / "other.json")), progress=False)
    # a run with another tokenizer than the data's token ids: one line before any id is misread
    _, other_run = trained
    assert ltsgen(["evaluate", "--run", str(other_run), "--data", str(data), "--eval-lengths", "16",
                   "--no-progress"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and "is tokenized with another tokenizer" in err and "Traceback" not in err
    )


def test_evaluate_cli(trained, tmp_path, capsys):
    data, run = trained
    assert (
        ltsgen(
            [
                "evaluate",
                "--run",
                str(run),
                "--data",
                str(data),
                "--lengths",
                "16,32",
                "--eval-sequences",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )  # the old spelling of --eval-lengths still works
    out = capsys.readouterr().out
    assert "rope_pi, zero-shot (trained as rope_pi at 32 tokens" in out and "eval.json" in out
    args = [
        "evaluate",
        "--run",
        str(run),
        "--data",
        str(data),
        "--eval-lengths",
        "16,32",
        "--eval-sequences",
        "4",
    ]
    assert ltsgen([*args, "--entropy-sequences", "2", "--no-progress"]) == 0
    report = json.loads((run / "eval.json").read_text())
    assert report["requested_entropy_sequences"] == 2
    assert [r["entropy_sequences"] for r in report["results"]] == [2, 2]
    assert [r["num_sequences"] for r in report["results"]] == [4, 4]  # the other numbers keep every document
    capsys.readouterr()
    assert ltsgen(["evaluate", "--run", str(tmp_path / "nothing"), "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "config.json: not found" in err
    assert ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", "16,x"]) == 2
    assert "comma-separated integers" in capsys.readouterr().err
    assert ltsgen(["evaluate", "--run", str(run), "--data", str(data), "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_evaluation_is_float32_by_default_even_under_a_callers_bf16_autocast(trained):
    data, run = trained
    plain = evaluate_run(run, data, [64], max_sequences=2, progress=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = evaluate_run(run, data, [64], max_sequences=2, progress=False)
        low = evaluate_run(run, data, [64], max_sequences=2, eval_dtype="bfloat16", progress=False)
    assert inside["results"][0]["loss"] == plain["results"][0]["loss"]
    assert low["eval_dtype"] == "bfloat16" and low["results"][0]["loss"] != plain["results"][0]["loss"]
    assert low["results"][0]["loss"] == pytest.approx(plain["results"][0]["loss"], rel=1e-2)


def test_a_rope_run_evaluated_as_yarn_rescales_zero_shot(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "lts")
    train(
        tiny_config(data, tmp_path / "rope", "rope", steps=3), progress=False, train_tokenizer=train_tokenizer
    )
    rope = evaluate_run(tmp_path / "rope", data, [32, 128], max_sequences=2, progress=False)
    yarn = evaluate_run(tmp_path / "rope", data, [32, 128], max_sequences=2, encoding="yarn", progress=False)
    assert (tmp_path / "rope" / "eval.json").exists() and (tmp_path / "rope" / "eval-yarn.json").exists()
    assert yarn["encoding"] == "yarn" and yarn["trained_as"] == "rope" and yarn["scaling"] == "zero-shot"
    assert yarn["results"][0]["loss"] == rope["results"][0]["loss"]  # at the training length: the same model
    assert yarn["results"][1]["loss"] != rope["results"][1]["loss"]
    with pytest.raises(TrainingError, match="only within rope, rope_pi, yarn"):
        evaluate_run(tmp_path / "rope", data, [32], max_sequences=2, encoding="alibi", progress=False)
    # the command line offers the encodings that rescale themselves
    with pytest.raises(SystemExit) as exited:
        ltsgen(["evaluate", "--run", str(tmp_path / "rope"), "--data", str(data), "--as-encoding", "alibi"])
    assert exited.value.code == 2
    assert "invalid choice: 'alibi' (choose from 'rope_pi', 'yarn')" in capsys.readouterr().err


@pytest.mark.parametrize("encoding", ["rope_pi", "yarn"])
def test_the_recall_controls_are_read_rescaled_as_the_recalls_are(encoding, monkeypatch):
    """The penalty's windows set the model to T; the controls of the recalls at L come after them."""
    from ltsgen.encodings import training_options
    from ltsgen.training import ModelConfig, TransformerLM
    from ltsgen.training import evaluate as evaluation
    from ltsgen.training.data import EvalSet
    from ltsgen.training.recall import Recall, RecallSet

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=2, encoding=encoding,
                         **training_options(encoding, 16))  # fmt: skip
    model = TransformerLM(config).eval()
    ids = torch.randint(0, 50, (2, 64))
    recall = Recall(row=0, start=60, end=62, distance=40, control_row=0, control_start=60, control_end=62)
    eval_set = EvalSet(
        length=64, input_ids=ids, documents=["a", "b"], recalls=RecallSet([recall], ids[:1], 0)
    )
    factors, scores = [], evaluation.token_scores

    def scored(model, tokens, *args):  # the real scoring, noting the factor it reads with
        factors.append((tokens.shape[1], model.encodings[0].factor))
        return scores(model, tokens, *args)

    monkeypatch.setattr(evaluation, "token_scores", scored)
    result = evaluation.evaluate_length(model, eval_set, torch.device("cpu"), train_length=16, batch_tokens=4096,
                                        entropy_sequences=1, dtype="float32")  # fmt: skip
    assert factors == [(64, 4.0), (64, 4.0)]  # the recalls' set, then their controls: both at 64 / 16
    assert result["recall_accuracy"] == result["recall_accuracy_control"]  # the same tokens, read alike


def test_a_run_read_as_another_encoding_takes_the_options_given_for_it():
    """``compare --encoding-option beta_fast=64`` reaches the zero-shot YaRN reading of the RoPE run."""
    from ltsgen.training.evaluate import as_encoding

    rope = {"encoding": "rope", "encoding_options": {"base": 500.0}}
    yarn = as_encoding(rope, "yarn", 32, {"beta_fast": 64.0})["encoding_options"]
    assert (yarn["beta_fast"], yarn["base"], yarn["factor"], yarn["original_length"]) == (
        64.0,
        500.0,
        1.0,
        32,
    )
