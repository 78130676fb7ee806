"""Tokenizer training, loading and batch encoding; `ltsgen tokenizer` from a corpus or a dataset, into a
tokenizer.json, a Hugging Face tokenizer folder, or attached to the dataset for the loaders."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from corpus_fixtures import ARXIV, C4_GZ, CODE, json_lines
from tokenizers import Tokenizer

from ltsgen.cli import main
from ltsgen.loaders import LoaderError
from ltsgen.loaders.contract import read_manifest
from ltsgen.loaders.files import sha256_file
from ltsgen.loaders.formats import read_shard
from ltsgen.loaders.storage import Storage
from ltsgen.outputs import LOCK_PATH, output_state, written_files
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
    with pytest.raises(TokenizerError, match="broken.json: not a tokenizer.json"):
        load_tokenizer(broken)
    with pytest.raises(TokenizerError) as error:  # the hub is offline in tests
        load_tokenizer("nobody-here/no-such-tokenizer")
    assert "Hugging Face Hub" in str(error.value) and "\n" not in str(error.value)


def test_every_way_ltsgen_reads_a_tokenizer_tokenizes_documents_whole(tmp_path, texts):
    """A tokenizer.json saved with truncation or padding (some on the Hub are) is read with both off by the
    builders (`--tokenizer`, a build's own copy) and the trainer: before, bucket lengths and evaluation
    documents were cut to its max_length, or padded, without a word."""
    from ltsgen.loaders.packing import parse_tokenizer
    from ltsgen.training.data import read_tokenizer

    plain = train_tokenizer(texts, 300)
    truncating = Tokenizer.from_str(plain.to_str())
    truncating.enable_truncation(4)
    truncating.enable_padding(length=64)
    path = tmp_path / "tokenizer.json"
    truncating.save(str(path))
    long_text = " ".join(texts[:5])
    whole = plain.encode(long_text, add_special_tokens=False).ids
    assert len(whole) > 64
    for read in (load_tokenizer(path), parse_tokenizer(path.read_bytes(), str(path)), read_tokenizer(path)):
        assert read.encode(long_text, add_special_tokens=False).ids == whole
    assert truncating.truncation is not None  # the caller's own object is left as it is


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


# ---------------------------------------------------------------- where the tokenizer goes


@pytest.fixture(scope="module")
def stories(tmp_path_factory) -> Path:
    """A small untokenized LongTinyStories build, as `ltsgen stories` writes it."""
    out = tmp_path_factory.mktemp("attach") / "lts"
    argv = ["stories", "--out", str(out), "--num-stories", "24", "--max-words", "500", "--no-progress"]
    assert main([*argv, "--samples-per-shard", "8", "--splits", "train=0.75,validation=0.25"]) == 0
    return out


def _stream(directory: Path, shard, tokenizer) -> np.ndarray:
    """A shard's documents in order, tokenized, each followed by EOS: what packing cuts."""
    ids = []
    for record in read_shard(str(directory / shard.path), read_manifest(directory).format, columns=["text"]):
        ids += [*tokenizer.encode(record["text"], add_special_tokens=False).ids, eos_id(tokenizer)]
    return np.asarray(ids)


def _ids(directory: Path, path: str, tokenizer) -> np.ndarray:
    """A shard's documents in order, tokenized, without EOS."""
    texts = [
        r["text"]
        for r in read_shard(str(directory / path), read_manifest(directory).format, columns=["text"])
    ]
    return np.concatenate([tokenizer.encode(text, add_special_tokens=False).ids for text in texts])


def test_attach_to_a_story_build_then_stream_packed_blocks(stories, capsys):
    from ltsgen.loaders import StreamingDataset

    with pytest.raises(LoaderError, match="not tokenized and no tokenizer was given or stored"):
        StreamingDataset(stories, seq_len=64)
    capsys.readouterr()
    assert main(["tokenizer", "--data", str(stories), "--vocab-size", "400", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(f"{stories / 'tokenizer.json'}: byte-level BPE, vocabulary 400")
    manifest = read_manifest(stories)
    tokenizer = load_tokenizer(stories)
    sha = sha256_file(stories / "tokenizer.json")
    shards = [shard for split in manifest.splits.values() for shard in split]
    counts = {shard.path: _stream(stories, shard, tokenizer).size - shard.samples for shard in shards}
    assert out.rstrip().endswith(
        f"attached to {stories} in its manifest, with the token ids of its 4 shards "
        f"({sum(counts.values()):,} tokens)"
    )
    assert not manifest.tokenized
    stored = manifest.tokenizer.pop("shards")
    assert manifest.tokenizer == {"path": "tokenizer.json", "sha256": sha, "vocab_size": 400, "eos_id": 0}
    assert {source: entry["tokens"] for source, entry in stored.items()} == counts
    for source, entry in stored.items():  # each shard's ids in DIR/tokens/<sha>/, one row per record
        assert entry["path"] == f"tokens/{sha[:16]}/{source}" and entry["path"] in written_files(stories)
        assert (entry["bytes"], entry["sha256"]) == (
            (stories / entry["path"]).stat().st_size,
            sha256_file(stories / entry["path"]),
        )
        rows = read_shard(str(stories / entry["path"]), "parquet", columns=["input_ids"])
        assert np.array_equal(
            np.concatenate([r["input_ids"] for r in rows]), _ids(stories, source, tokenizer)
        )
    assert not (stories / ".ltsgen" / "tokens.jsonl").exists()
    other = train_tokenizer(["another vocabulary entirely, of other words"] * 20, 300)
    for split in ("train", "validation"):
        for given, reads in ((None, "tokens/"), (tokenizer, "tokens/"), (other, f"{split}/")):
            dataset = StreamingDataset(stories, split, seq_len=64, shuffle=False, tokenizer=given)
            assert all(
                s.path.startswith(reads) for s in dataset.read_shards
            )  # stored ids for their tokenizer
            blocks = [b["input_ids"] for b in dataset]
            stream = np.concatenate([_stream(stories, s, given or tokenizer) for s in manifest.shards(split)])
            assert len(blocks) == stream.size // 65 > 0
            assert np.array_equal(torch.cat(blocks).numpy(), stream[: len(blocks) * 65])

    # attaching writes the card again (before: it named no tokenizer until `ltsgen card`); the card of an
    # untokenized build with a tokenizer reads the text columns, not token ids
    card = (stories / "README.md").read_text(encoding="utf-8")
    assert (
        "Text stored untokenized, its token ids in `tokens/` (which the loaders read), by `tokenizer.json`"
        in card
    )
    assert main(["card", str(stories)]) == 0
    assert (stories / "README.md").read_text(encoding="utf-8") == card
    capsys.readouterr()

    # training again replaces the attached tokenizer, and says so; a card edited by hand is kept, and named
    first = sha256_file(stories / "tokenizer.json")
    (stories / "README.md").write_text(card + "My notes.\n", encoding="utf-8")
    assert main(["tokenizer", "--data", str(stories), "--vocab-size", "300", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "(replacing the earlier one)" in out
    assert out.rstrip().endswith(
        f"  note: {stories / 'README.md'} was edited since ltsgen wrote it, so it was not written again: "
        f"`ltsgen card {stories}` names the tokenizer in it"
    )
    assert (stories / "README.md").read_text(encoding="utf-8") == card + "My notes.\n"
    assert read_manifest(stories).tokenizer["sha256"] == sha256_file(stories / "tokenizer.json") != first
    assert load_tokenizer(stories).get_vocab_size() == 300
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert output_state(stories, name) == "ltsgen"  # so --overwrite removes it with the build
    new = sha256_file(stories / "tokenizer.json")
    assert sorted(p.name for p in (stories / "tokens").iterdir()) == [new[:16]]  # the replaced ids removed
    capsys.readouterr()

    # the same tokenizer trained again is said to be the same (before: "replacing the earlier one")
    assert main(["tokenizer", "--data", str(stories), "--vocab-size", "300", "--no-progress"]) == 0
    assert "(the same tokenizer as before)" in capsys.readouterr().out
    assert sorted(p.name for p in (stories / "tokens").iterdir()) == [new[:16]]

    # not while a build holds the directory's lock: nothing changes
    before = (stories / "manifest.json").read_bytes(), (stories / "tokenizer.json").read_bytes()
    with Storage(stories).lock(LOCK_PATH):
        assert main(["tokenizer", "--data", str(stories), "--vocab-size", "400", "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith(f"ltsgen tokenizer: error: {stories}: another build is running")
    assert ((stories / "manifest.json").read_bytes(), (stories / "tokenizer.json").read_bytes()) == before


def test_stored_token_ids_resume_after_a_failure_and_autotokenizer_loads_the_dataset(tmp_path, capsys):
    from transformers import AutoTokenizer

    from ltsgen.loaders import StreamingDataset

    data = tmp_path / "lts"
    argv = ["stories", "--out", str(data), "--num-stories", "24", "--max-words", "300", "--no-progress"]
    assert main([*argv, "--samples-per-shard", "8", "--splits", "train=0.75,validation=0.25"]) == 0
    last = read_manifest(data).shards("validation")[-1].path
    intact = (data / last).read_bytes()
    (data / last).write_bytes(intact[:100] + bytes([intact[100] ^ 1]) + intact[101:])  # a corrupt shard
    before = (data / "manifest.json").read_bytes()
    capsys.readouterr()
    attach = ["tokenizer", "--data", str(data), "--vocab-size", "300", "--no-progress"]
    assert main(attach) == 2
    assert re.fullmatch(
        rf"ltsgen tokenizer: error: {data / last}: sha256 [0-9a-f]{{16}}\.\.\. does not match the manifest's "
        r"[0-9a-f]{16}\.\.\. \(corrupt or changed shard\)\n",
        capsys.readouterr().err,
    )
    assert (data / "manifest.json").read_bytes() == before and not (data / "tokenizer.json").exists()
    done = sorted((data / "tokens").rglob("*.parquet"))
    state = data / ".ltsgen"
    finished = [json.loads(line)["shards"] for line in (state / "tokens.jsonl").read_text().splitlines()]
    announced = [json.loads(line)["writing"] for line in (state / "writing.jsonl").read_text().splitlines()]
    assert announced == [shards[0]["path"] for shards in finished]  # announced before each was published
    assert len(done) == len(finished) == 3
    written = {path: path.stat().st_mtime_ns for path in done}

    (data / last).write_bytes(intact)
    assert main(attach) == 0
    assert "with the token ids of its 4 shards (" in (out := capsys.readouterr().out)
    assert out.rstrip().endswith(" tokens, 3 of them kept from an interrupted run)")
    assert {path: path.stat().st_mtime_ns for path in done} == written  # kept, not written again
    assert not (data / ".ltsgen" / "tokens.jsonl").exists()
    tokenizer = load_tokenizer(data)
    for shard, entry in read_manifest(data).tokenizer["shards"].items():
        rows = read_shard(str(data / entry["path"]), "parquet", columns=["input_ids"])
        assert np.array_equal(np.concatenate([r["input_ids"] for r in rows]), _ids(data, shard, tokenizer))
    first = next(iter(StreamingDataset(data, seq_len=32, batch_size=2).loader()))["input_ids"]
    assert first.shape == (2, 33)

    hf = AutoTokenizer.from_pretrained(str(data))  # the dataset folder is a tokenizer folder too
    assert (hf.eos_token, hf.eos_token_id, len(hf)) == ("<|endoftext|>", 0, 300)
    text = "Once upon a time, a small fox found a key."
    assert (
        hf(text, add_special_tokens=False)["input_ids"]
        == tokenizer.encode(text, add_special_tokens=False).ids
    )


def test_attach_refuses_token_ids_of_another_tokenizer(tmp_path, real_data, capsys):
    papers = tmp_path / "papers.jsonl"
    papers.write_bytes(b"".join((real_data / ARXIV).read_bytes().splitlines(keepends=True)[:2]))
    own = tmp_path / "own.json"
    argv = ["--source", "redpajama-arxiv", "--input", str(papers)]
    assert main(["tokenizer", *argv, "--vocab-size", "300", "--out", str(own), "--no-progress"]) == 0
    data = tmp_path / "data"
    build = ["buckets", *argv, "--out", str(data), "--tokenizer", str(own), "--no-card", "--no-progress"]
    assert main([*build, "--eval-per-length", "0", "--splits", "train=1"]) == 0
    before = {p.name: p.read_bytes() for p in data.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["tokenizer", "--data", str(data), "--vocab-size", "400", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"ltsgen tokenizer: error: {data}: its records hold token ids of its own tokenizer; "
        "give --out to write another tokenizer elsewhere\n"
    )
    assert {p.name: p.read_bytes() for p in data.iterdir() if p.is_file()} == before


def test_out_folder_is_a_complete_hugging_face_tokenizer(tmp_path, real_data, texts):
    from transformers import AutoTokenizer

    corpus = ["--source", "c4", "--input", str(real_data / C4_GZ), "--max-documents", "100"]
    folder, single = tmp_path / "hf-tokenizer", tmp_path / "single.json"
    for out in (folder, single):
        assert main(["tokenizer", *corpus, "--vocab-size", "500", "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["single.json"]
    assert (folder / "tokenizer.json").read_bytes() == single.read_bytes()

    hf = AutoTokenizer.from_pretrained(str(folder))
    assert (hf.eos_token, hf.eos_token_id) == ("<|endoftext|>", 0)
    assert (hf.bos_token_id, hf.unk_token_id, len(hf)) == (0, 0, 500)
    own = load_tokenizer(single)
    for text in [texts[0], texts[150][:3000], "naïve café — 東京 🚀"]:
        ids = own.encode(text, add_special_tokens=False).ids
        assert hf(text, add_special_tokens=False)["input_ids"] == ids
        assert hf.decode(ids) == text
    assert hf(texts[1])["input_ids"] + [hf.eos_token_id] == [*own.encode(texts[1]).ids, 0]


def test_help_shows_each_default_once_and_examples():
    import contextlib
    import io

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        main(["tokenizer", "--help"])
    text = " ".join(help_text.getvalue().split())
    assert text.count("(default: 8192)") == 1 and "(default: None)" not in text
    assert text.count("(default: train)") == 1 and "--no-progress no progress bar" in text
    assert "examples: ltsgen tokenizer --data lts --vocab-size 2048" in text


@pytest.fixture
def small_stories(tmp_path) -> Path:
    data = tmp_path / "lts"
    argv = ["stories", "--out", str(data), "--num-stories", "24", "--max-words", "300", "--no-progress"]
    assert main([*argv, "--samples-per-shard", "8", "--splits", "train=0.75,validation=0.25"]) == 0
    return data


def _texts(directory: Path) -> list[str]:
    manifest = read_manifest(directory)
    return [
        record["text"]
        for shard in manifest.shards("train")
        for record in read_shard(str(directory / shard.path), manifest.format, columns=["text"])
    ]


def test_a_state_taken_while_tokenizing_resumes_on_the_stored_ids_of_that_tokenizer(small_stories, tmp_path):
    from ltsgen.attach import attach_tokenizer
    from ltsgen.loaders import StreamingDataset
    from ltsgen.tokenizer import save_tokenizer

    tokenizer = train_tokenizer(_texts(small_stories), 300)
    given = save_tokenizer(tokenizer, tmp_path / "given.json")
    options = {"seq_len": 16, "batch_size": 2, "seed": 3}
    tokenizing = StreamingDataset(small_stories, tokenizer=given, **options).loader()
    batches = [batch["input_ids"] for batch in tokenizing]
    assert len(batches) > 3 and not tokenizing.streaming.reads_stored_ids
    resumed = StreamingDataset(small_stories, tokenizer=given, **options).loader()
    for _ in zip(range(2), resumed, strict=False):
        pass
    state = resumed.state_dict()

    attach_tokenizer(small_stories, tokenizer)
    stored = StreamingDataset(small_stories, **options).loader()
    assert stored.streaming.reads_stored_ids
    assert stored.streaming.identity == tokenizing.streaming.identity
    stored.load_state_dict(state)  # the same tokenizer, read from its stored ids: the same stream
    assert all(torch.equal(a, b["input_ids"]) for a, b in zip(batches[2:], stored, strict=True))

    attach_tokenizer(small_stories, train_tokenizer(_texts(small_stories)[:6], 280))
    with pytest.raises(LoaderError, match=r"^state\.identity\.tokenizer_sha256: "):
        StreamingDataset(small_stories, **options).load_state_dict(state)


def test_a_changed_shard_is_refused_by_every_command_that_reads_its_text(small_stories, tmp_path, capsys):
    """One byte changed in the middle of a shard: pyarrow still decodes it, with 9 stories altered. Before,
    `tokenizer --data --out` trained on them and `card` described them, both exiting 0."""
    shard = small_stories / read_manifest(small_stories).shards("train")[0].path
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    expected = rf"^ltsgen (tokenizer|card): error: {shard}: sha256 [0-9a-f]{{16}}\.\.\. does not match the manifest's"
    capsys.readouterr()
    for argv in (["tokenizer", "--data", str(small_stories), "--vocab-size", "280", "--out", str(tmp_path / "t.json"),
                  "--no-progress"], ["card", str(small_stories)]):  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert re.match(expected, err) and err.count("\n") == 1, err
    assert not (tmp_path / "t.json").exists()


def test_a_tokenizer_set_to_truncate_is_attached_with_whole_documents(small_stories):
    """Before, its stored ids were each document's first 4 tokens, and its stored tokenizer.json kept the
    truncation for any later reader."""
    from ltsgen.attach import attach_tokenizer
    from ltsgen.loaders import StreamingDataset

    plain = train_tokenizer(_texts(small_stories), 300)
    truncating = Tokenizer.from_str(plain.to_str())
    truncating.enable_truncation(4)
    options = {"seq_len": 16, "batch_size": 2, "seed": 3}
    expected = [b["input_ids"] for b in StreamingDataset(small_stories, tokenizer=plain, **options).loader()]
    attach_tokenizer(small_stories, truncating)
    stored = StreamingDataset(small_stories, **options)
    assert stored.reads_stored_ids
    assert all(torch.equal(a, b["input_ids"]) for a, b in zip(expected, stored.loader(), strict=True))
    assert Tokenizer.from_file(str(small_stories / "tokenizer.json")).truncation is None


def test_attaching_never_writes_over_files_of_yours_nor_tokenizes_a_text_over_max_doc_chars(
    small_stories, capsys
):
    import hashlib

    from ltsgen.attach import attach_tokenizer, token_shard_path
    from ltsgen.build import BuildError
    from ltsgen.tokenizer import tokenizer_bytes

    tokenizer = train_tokenizer(_texts(small_stories), 300)
    sha = hashlib.sha256(tokenizer_bytes(tokenizer)).hexdigest()
    before = (small_stories / "manifest.json").read_bytes()
    with pytest.raises(
        LoaderError,
        match=r"shard-00000.parquet: record 0 has [\d,]+ characters, over --max-doc-chars=10 \(tok.*0 for no limit\)$",
    ):
        attach_tokenizer(small_stories, tokenizer, max_doc_chars=10)
    first = read_manifest(small_stories).shards("train")[0].path
    for mine in ("tokenizer_config.json", "special_tokens_map.json", token_shard_path(sha, first)):
        (small_stories / mine).parent.mkdir(parents=True, exist_ok=True)
        (small_stories / mine).write_text("mine\n")
        with pytest.raises(BuildError, match=f"^{small_stories / mine}: not written by ltsgen"):
            attach_tokenizer(small_stories, tokenizer)
        assert (small_stories / mine).read_text() == "mine\n"
        assert (small_stories / "manifest.json").read_bytes() == before
        (small_stories / mine).unlink()
    capsys.readouterr()
    attach = ["tokenizer", "--data", str(small_stories), "--vocab-size", "300", "--no-progress"]
    (small_stories / "special_tokens_map.json").write_text("mine\n")
    assert main(attach) == 2  # refused before the tokenizer is trained
    assert capsys.readouterr().err == (
        f"ltsgen tokenizer: error: {small_stories / 'special_tokens_map.json'}: not written by ltsgen; move "
        "it away to attach one (ltsgen never writes over a file of yours)\n"
    )
    (small_stories / "special_tokens_map.json").unlink()

    attach_tokenizer(small_stories, tokenizer)
    # ltsgen's own file edited by hand since: the user's now (before: written over without a word)
    config = small_stories / "tokenizer_config.json"
    edited = config.read_text().replace("{", '{"my_note": "edited", ', 1)
    config.write_text(edited)
    with pytest.raises(
        BuildError, match=f"^{config}: edited since ltsgen wrote it; move it away to attach one"
    ):
        attach_tokenizer(small_stories, train_tokenizer(_texts(small_stories)[:6], 280))
    assert config.read_text() == edited
    config.unlink()
    attach_tokenizer(small_stories, tokenizer)
    mine = small_stories / "tokens" / sha[:16] / "notes.txt"
    mine.write_text("mine\n")
    attach_tokenizer(small_stories, train_tokenizer(_texts(small_stories)[:6], 280))  # replaces the first
    assert sorted(
        p.relative_to(small_stories).as_posix() for p in (small_stories / "tokens" / sha[:16]).rglob("*")
    ) == [f"tokens/{sha[:16]}/notes.txt"]  # its token shards removed, a file of yours kept


def test_a_mixture_with_a_given_tokenizer_reads_the_stored_ids_of_one_source_and_tokenizes_the_other(
    small_stories, tmp_path
):
    import shutil

    from ltsgen.attach import attach_tokenizer
    from ltsgen.loaders import StreamingDataset

    plain = tmp_path / "plain"
    shutil.copytree(small_stories, plain)
    tokenizer = train_tokenizer(_texts(small_stories), 300)
    attach_tokenizer(small_stories, tokenizer)
    mixture = StreamingDataset({str(small_stories): 0.5, str(plain): 0.5}, seq_len=16, tokenizer=tokenizer)
    assert [source.reads_stored_ids for source in mixture.sources] == [True, False]
    assert next(iter(mixture.loader()))["input_ids"].shape == (1, 17)


def test_a_vocabulary_smaller_than_asked_says_so(tmp_path, capsys):
    """Before: "vocabulary 290" for --vocab-size 5000, without a word that the size was not reached."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a short text with few pairs to merge\n")
    argv = ["tokenizer", "--source", "text", "--input", str(corpus), "--out", str(tmp_path / "t.json")]
    assert main([*argv, "--vocab-size", "5000", "--no-progress"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    size = load_tokenizer(tmp_path / "t.json").get_vocab_size()
    assert (
        size < 5000 and f"vocabulary {size:,} (of 5,000 asked: the text has no more pairs to merge)" in line
    )


def test_attaching_never_removes_a_file_outside_the_dataset(small_stories, tmp_path, capsys):
    """Journals and manifests are data: before, a journal line naming tokens/../../x, or a replaced
    tokenizer's entry naming a path through a symlinked folder, deleted that file outside the dataset."""
    outside = tmp_path / "theirs"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    writing = small_stories / ".ltsgen" / "writing.jsonl"
    with writing.open("a") as log:
        log.write(json.dumps({"writing": "tokens/../../theirs/victim.txt"}) + "\n")
    assert main(["tokenizer", "--data", str(small_stories), "--vocab-size", "300", "--no-progress"]) == 0
    assert (outside / "victim.txt").read_text() == "keep me"

    (small_stories / "out").symlink_to(outside)
    manifest = json.loads((small_stories / "manifest.json").read_text())
    manifest["tokenizer"]["shards"]["0" * 64] = {**next(iter(manifest["tokenizer"]["shards"].values())),
                                                 "path": "out/victim.txt"}  # fmt: skip
    (small_stories / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    main(["tokenizer", "--data", str(small_stories), "--vocab-size", "290", "--no-progress"])
    assert (outside / "victim.txt").read_text() == "keep me"
    assert sorted(path.name for path in outside.iterdir()) == ["victim.txt"]
    # a tokens/ folder a symlink takes out of the dataset is refused before any work: shards are replaced there
    shutil.rmtree(small_stories / "tokens")
    (small_stories / "tokens").symlink_to(outside)
    capsys.readouterr()
    assert main(["tokenizer", "--data", str(small_stories), "--vocab-size", "300", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"ltsgen tokenizer: error: {small_stories / 'tokens'}: leads out of the dataset (a symlink): token shards "
        "are written and replaced there, so make it a folder of the dataset\n"
    )
    assert sorted(path.name for path in outside.iterdir()) == ["victim.txt"]


def test_a_tokenizer_that_gives_up_on_a_text_is_a_tokenizer_error():
    """A pre-tokenizer regex that backtracks without end: the library gives up with a Rust panic, which is no
    Exception (before: a traceback of 117 lines through the build)."""
    from tokenizers import Regex, models, pre_tokenizers

    hostile = Tokenizer(models.BPE())
    hostile.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+$"), "isolated")
    with pytest.raises(TokenizerError, match="^the tokenizer failed on a text \\(Onig: "):
        encode_arrays(hostile, ["a" * 5000 + "b"])
