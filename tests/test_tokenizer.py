"""Tokenizer training, loading and batch encoding, and `ltsgen tokenizer` from a corpus or a dataset."""

from __future__ import annotations

import numpy as np
import pytest
from test_corpora import ARXIV, C4_GZ, CODE, json_lines

from ltsgen.cli import main
from ltsgen.tokenizer import TokenizerError, encode_arrays, eos_id, load_tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def texts(real_data) -> list[str]:
    return [row["text"] for row in json_lines(real_data / C4_GZ)[:300]]


def test_training_is_deterministic_with_exact_vocabulary(texts):
    first, second = train_tokenizer(texts, 512), train_tokenizer(texts, 512)
    assert first.to_str() == second.to_str()
    assert first.get_vocab_size() == 512
    assert eos_id(first) == first.token_to_id("<|endoftext|>") == 0
    with pytest.raises(TokenizerError, match="below the 256 bytes"):
        train_tokenizer(texts, 200)


def test_byte_level_round_trip_and_batch_arrays(texts, real_data):
    tokenizer = train_tokenizer(texts, 512)
    samples = [
        texts[0],
        json_lines(real_data / ARXIV)[0]["text"][:5000],
        json_lines(real_data / CODE)[0]["text"],
    ]
    samples.append(
        "naïve café — 東京 🚀"
    )  # bytes never seen in training still encode (byte fallback alphabet)
    values, offsets = encode_arrays(tokenizer, samples)
    assert values.dtype == np.uint32 and offsets[0] == 0 and len(offsets) == len(samples) + 1
    for i, text in enumerate(samples):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert values[offsets[i] : offsets[i + 1]].tolist() == ids
        assert tokenizer.decode(ids) == text


def test_load_file_folder_and_one_line_errors(tmp_path, texts):
    path = tmp_path / "tokenizer.json"
    train_tokenizer(texts[:50], 300).save(str(path))
    assert load_tokenizer(path).get_vocab_size() == 300
    assert load_tokenizer(tmp_path).get_vocab_size() == 300
    with pytest.raises(TokenizerError, match="no such tokenizer file"):
        load_tokenizer(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match="not a Hugging Face tokenizer.json"):
        load_tokenizer(broken)
    with pytest.raises(TokenizerError) as error:  # the hub is offline in tests
        load_tokenizer("nobody-here/no-such-tokenizer")
    assert "Hugging Face Hub" in str(error.value) and "\n" not in str(error.value)


def test_cli_trains_from_corpus_and_from_dataset_directory(tmp_path, real_data, capsys):
    papers = tmp_path / "papers.jsonl"
    papers.write_bytes(b"".join((real_data / ARXIV).read_bytes().splitlines(keepends=True)[:4]))
    out = tmp_path / "arxiv.json"
    argv = ["tokenizer", "--source", "redpajama-arxiv", "--input", str(papers)]
    assert main([*argv, "--vocab-size", "600", "--out", str(out)]) == 0
    assert "trained on 4 documents" in capsys.readouterr().out
    tokenizer = load_tokenizer(out)
    assert tokenizer.get_vocab_size() == 600 and eos_id(tokenizer) == 0

    data = tmp_path / "data"
    build = [
        "buckets",
        "--source",
        "redpajama-arxiv",
        "--input",
        str(papers),
        "--out",
        str(data),
        "--no-card",
    ]
    build += ["--tokenizer", str(out), "--eval-sequences", "0", "--splits", "train=1", "--no-progress"]
    assert main(build) == 0
    capsys.readouterr()
    again = tmp_path / "again.json"
    assert main(["tokenizer", "--data", str(data), "--vocab-size", "600", "--out", str(again)]) == 0
    assert "trained on 4 documents" in capsys.readouterr().out
    assert again.read_bytes() == out.read_bytes()  # the same texts (in bucket order): the same tokenizer

    assert main(["tokenizer", "--vocab-size", "600", "--out", str(again)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "ltsgen tokenizer: error: give either --data DIR or --source with --input"
    )
