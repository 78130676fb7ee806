"""The corpus readers on the real samples (C4, arXiv, code, TinyStories) and files built from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_fixtures import ARXIV, C4_GZ, C4_JSONL, CODE, TINY_EOT, json_lines, write_pile_zst

from ltsgen.build import BuildError
from ltsgen.corpora.inputs import expand_inputs
from ltsgen.corpora.readers import ReaderOptions, Screen, read_documents


def write_stack_parquet(directory: Path, real_data: Path, files: int = 2) -> int:
    """Real Stack-layout parquet files (content, lang, max_stars_repo_name, ...) from the code sample."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = json_lines(real_data / CODE)
    directory.mkdir(parents=True, exist_ok=True)
    per_file = (len(rows) + files - 1) // files
    for number in range(files):
        part = rows[number * per_file : (number + 1) * per_file]
        table = pa.table(
            {
                "content": [r["text"] for r in part],
                "lang": [r["meta"]["repo_language"] for r in part],
                "max_stars_repo_name": [r["meta"]["repo_name"] for r in part],
                "max_stars_repo_path": [r["meta"]["file_name"] for r in part],
                "size": [len(r["text"].encode("utf-8")) for r in part],
            }
        )
        pq.write_table(table, directory / f"data-{number:05d}.parquet", row_group_size=100)
    return len(rows)


# ---------------------------------------------------------------- readers on the real samples


def read_all(source: str, inputs: list, **options) -> tuple[list, Screen]:
    screen = Screen(skip_bad=options.pop("skip_bad", False), strict=options.pop("strict", False))
    documents = list(read_documents(source, [str(p) for p in inputs], ReaderOptions(**options), screen))
    return documents, screen


def test_c4_both_files_400_documents_same_text(real_data):
    plain, _ = read_all("c4", [real_data / C4_JSONL])
    packed, _ = read_all("c4", [real_data / C4_GZ])
    assert len(plain) == len(packed) == 400
    assert [d.text for d in plain] == [d.text for d in packed]
    assert plain[0].text.startswith("Beginners BBQ Class Taking Place in Missoula!")
    assert {d.source for d in plain} == {"c4"}
    assert plain[0].meta["url"].startswith("https://") and "/" in plain[0].meta["url"]  # \/ unescaped
    assert packed[0].meta["timestamp"] == "2019-04-25T12:57:54Z"
    assert plain[0].where.endswith(f"{C4_JSONL}:1")


def test_bz2_xz_and_ndjson_are_read_and_compressed_bytes_under_a_plain_name_are_refused(tmp_path, real_data):
    """Before: .bz2 and .xz bytes were read as text (counted as invalid UTF-8), and a folder's .ndjson left out."""
    import bz2
    import lzma

    raw = (real_data / C4_JSONL).read_bytes()
    folder = tmp_path / "c4"
    folder.mkdir()
    (folder / "a.jsonl.bz2").write_bytes(
        bz2.compress(raw[: len(raw) // 2]) + bz2.compress(raw[len(raw) // 2 :])
    )
    (folder / "b.ndjson.xz").write_bytes(lzma.compress(raw) + b"\0" * 8)  # stream padding, as xz allows
    (folder / "README.md").write_text("a folder's notes, not data\n", encoding="utf-8")
    documents, screen = read_all("c4", [folder])
    plain, _ = read_all("c4", [real_data / C4_JSONL])
    assert [d.text for d in documents] == [d.text for d in plain] * 2 and not screen.counts
    cut = tmp_path / "cut.jsonl.xz"
    cut.write_bytes(lzma.compress(raw)[:5000])
    with pytest.raises(
        BuildError, match=rf"^{cut}:\d+: truncated xz stream \(the file ends inside a stream\)"
    ):
        read_all("c4", [cut])
    misnamed = tmp_path / "c4.jsonl"
    misnamed.write_bytes(bz2.compress(raw))
    with pytest.raises(
        BuildError,
        match=rf"^{misnamed}:1: bzip2-compressed, but its name does not end in .bz2 \(use --skip-bad",
    ):
        read_all("c4", [misnamed])
    documents, screen = read_all("c4", [misnamed, real_data / C4_JSONL], skip_bad=True)
    assert len(documents) == 400 and screen.counts == {"skipped: compressed, misnamed": 1}
    text = tmp_path / "radio.txt"  # a plain text that opens with the letters of bzip2's mark
    text.write_text("BZh, the sound the old radio made.\n", encoding="utf-8")
    assert [d.text for d in read_all("text", [text])[0]] == ["BZh, the sound the old radio made.\n"]


def test_redpajama_arxiv_5_documents(real_data):
    documents, _ = read_all("redpajama-arxiv", [real_data / ARXIV])
    assert len(documents) == 5
    assert {d.source for d in documents} == {"arxiv"}
    ids = [d.meta["arxiv_id"] for d in documents]
    assert len(set(ids)) == 5 and all(i.startswith("2208.") for i in ids)
    assert {d.meta["yymm"] for d in documents} == {"2208"}


def test_code_sample_124_documents_through_pile_reader(real_data):
    documents, _ = read_all("pile", [real_data / CODE])
    assert len(documents) == 124
    assert {d.source for d in documents} == {"pile"}  # no pile_set_name in the stand-in
    languages = {d.meta["repo_language"] for d in documents}
    assert languages == {"C", "C++", "Python", "Java", "Perl", "Go"}


def test_pile_jsonl_zst_subsets(tmp_path, real_data):
    path = tmp_path / "00.jsonl.zst"
    code, arxiv = write_pile_zst(path, real_data)
    everything, _ = read_all("pile", [path])
    github, screen = read_all("pile", [path], subset="Github")
    assert screen.counts == {"other subsets": arxiv}
    papers, _ = read_all("pile", [path], subset="ArXiv")
    assert (len(everything), len(github), len(papers)) == (code + arxiv, 124, 5)
    assert {d.source for d in github} == {"github"} and {d.source for d in papers} == {"arxiv"}
    assert [d.text for d in github] == [r["text"] for r in json_lines(real_data / CODE)]


def test_stack_parquet_files_by_glob(tmp_path, real_data):
    count = write_stack_parquet(tmp_path / "stack", real_data)
    documents, _ = read_all("stack", [tmp_path / "stack" / "*.parquet"])
    assert len(documents) == count == 124
    assert {d.source for d in documents} == {"stack"}
    assert documents[0].meta["lang"] == "Python" or documents[0].meta["lang"] in {
        "C",
        "C++",
        "Java",
        "Perl",
        "Go",
    }
    assert set(documents[0].meta) == {"lang", "max_stars_repo_name", "max_stars_repo_path", "size"}
    assert documents[-1].where.endswith("data-00001.parquet:row 62")


def test_text_files_and_folders(tmp_path, real_data):
    stories, _ = read_all("text", [real_data / TINY_EOT], separator="<|endoftext|>")
    assert len(stories) == 5
    assert all(s.text == s.text.strip() and "<|endoftext|>" not in s.text for s in stories)
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("first document\n", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("second document\n", encoding="utf-8")
    (folder / ".hidden.txt").write_text("not read\n", encoding="utf-8")
    documents, _ = read_all("text", [folder])
    assert [d.text for d in documents] == ["first document\n", "second document\n"]


def test_hf_local_folder_streams(tmp_path, real_data):
    folder = tmp_path / "hf_arxiv"
    folder.mkdir()
    (folder / "train.jsonl").write_bytes((real_data / ARXIV).read_bytes())
    documents, _ = read_all("hf", [folder])
    assert len(documents) == 5
    assert {d.source for d in documents} == {"hf-arxiv"}
    assert documents[0].text == json_lines(real_data / ARXIV)[0]["text"]


def test_hf_hub_name_offline_is_one_line_error():
    with pytest.raises(BuildError) as error:
        list(read_documents("hf", ["nobody-here/no-such-dataset"], ReaderOptions(), Screen()))
    assert "nobody-here/no-such-dataset" in str(error.value) and "\n" not in str(error.value)


def test_inputs_globs_folders_and_missing(tmp_path, real_data):
    files = expand_inputs([str(real_data / "c4_en" / "*.json*")])
    assert [f.name for f in files] == sorted(p.name for p in (real_data / "c4_en").glob("*.json*"))
    with pytest.raises(BuildError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.jsonl")])
    with pytest.raises(BuildError, match="no such file"):
        expand_inputs([str(tmp_path / "missing.jsonl")])


# ---------------------------------------------------------------- bad input, file by file


def _lines_file(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


GOOD = b'{"text": "a good document", "url": "https://example.org/"}'


@pytest.mark.parametrize(
    "line, problem, kind",
    [
        (b'{"text": "cut off', "malformed JSON", "malformed JSON"),
        (b'{"url": "https://example.org/"}', "missing text field 'text'", "missing text field"),
        (b'{"text": null}', "missing text field 'text'", "missing text field"),
        (b'{"text": 5}', "text field 'text' is int, not a string", "text not a string"),
        (b"[1, 2]", "malformed JSON", "malformed JSON"),
        # more digits than Python converts: before, a ValueError naming no file (a traceback in `tokenizer`)
        (
            b'{"text": "a", "n": ' + b"9" * 5000 + b"}",
            "malformed JSON (Exceeds the limit (4300 digits) for integer string conversion)",
            "malformed JSON",
        ),
    ],
)
def test_bad_lines_fail_with_file_and_line_or_count(tmp_path, line, problem, kind):
    path = _lines_file(tmp_path / "bad.jsonl", [GOOD, line, GOOD])
    with pytest.raises(BuildError) as error:
        read_all("c4", [path])
    assert str(error.value).startswith(f"{path}:2: {problem}") and "\n" not in str(error.value)
    documents, screen = read_all("c4", [path], skip_bad=True)
    assert len(documents) == 2 and screen.counts == {f"skipped: {kind}": 1}


def test_empty_and_invalid_utf8_are_counted_or_strict(tmp_path):
    path = _lines_file(
        tmp_path / "unclean.jsonl",
        [
            GOOD,
            b'{"text": "  \\n "}',
            b'{"text": "bad \xff byte"}',
            b'{"text": "lone \\ud800 surrogate"}',
            GOOD,
        ],
    )
    documents, screen = read_all("c4", [path])
    assert len(documents) == 2
    assert screen.counts == {"skipped: empty": 1, "skipped: invalid UTF-8": 2}
    with pytest.raises(BuildError, match=rf"^{path}:2: empty document \(--strict\)$"):
        read_all("c4", [path], strict=True)


def test_utf16_text_is_counted_as_such_not_read_as_text_with_nul_characters(tmp_path):
    """BOM-less UTF-16 of ASCII is valid UTF-8, a NUL beside every character: before, built into shards as
    documents twice their length, and a JSON line of it reported as malformed JSON."""
    text = "a cat sat on the mat. the end."
    (tmp_path / "le.txt").write_bytes(text.encode("utf-16-le"))
    (tmp_path / "bom.txt").write_bytes(text.encode("utf-16"))  # with its byte-order mark
    (tmp_path / "le.jsonl").write_bytes((json.dumps({"text": text}) + "\n").encode("utf-16-le"))
    (tmp_path / "good.txt").write_text(text)
    documents, screen = read_all("text", [tmp_path / name for name in ("le.txt", "bom.txt", "good.txt")])
    assert [d.text for d in documents] == [text]
    assert screen.counts == {
        "skipped: NUL bytes (UTF-16 or binary), not UTF-8 text": 1,
        "skipped: UTF-16 (its byte-order mark), not UTF-8": 1,
    }
    with pytest.raises(
        BuildError, match=rf"^{tmp_path / 'le.jsonl'}:1: NUL bytes \(UTF-16 or binary\), not UTF-8"
    ):
        read_all("c4", [tmp_path / "le.jsonl"], strict=True)


def test_a_utf8_bom_opening_a_file_is_not_read_as_text(tmp_path):
    """Files saved by Windows editors open with U+FEFF: not part of the first document (nor of its id)."""
    bom = b"\xef\xbb\xbf"
    documents, screen = read_all("c4", [_lines_file(tmp_path / "bom.jsonl", [bom + GOOD, GOOD])])
    assert [d.text for d in documents] == ["a good document"] * 2 and not screen.counts
    (tmp_path / "doc.txt").write_bytes(bom + b"a cat sat\n\nthe end\n")
    for separator in (None, "\n\n"):
        documents, _ = read_all("text", [tmp_path / "doc.txt"], separator=separator)
        assert documents[0].text.startswith("a cat sat")
    (tmp_path / "doc.txt").write_bytes(b"a cat sat\n\n" + bom + b"inside")  # kept past the start
    documents, _ = read_all("text", [tmp_path / "doc.txt"], separator="\n\n")
    assert [d.text for d in documents] == ["a cat sat", "\ufeffinside"]


def _truncate(path: Path, keep: float) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def test_truncated_gzip_and_zstd_name_file_and_line(tmp_path, real_data):
    gz = tmp_path / "c4.json.gz"
    gz.write_bytes((real_data / C4_GZ).read_bytes()[:300_000])
    with pytest.raises(BuildError, match=rf"^{gz}:\d+: truncated gzip stream"):
        read_all("c4", [gz])
    documents, screen = read_all("c4", [gz], skip_bad=True)
    assert 0 < len(documents) < 400 and screen.counts == {"skipped: truncated stream": 1}

    zst = tmp_path / "pile.jsonl.zst"
    write_pile_zst(zst, real_data)
    _truncate(zst, 0.5)
    with pytest.raises(BuildError, match=rf"^{zst}:\d+: truncated zstd stream"):
        read_all("pile", [zst])
    documents, screen = read_all("pile", [zst], skip_bad=True)
    assert 0 < len(documents) < 129 and screen.counts == {"skipped: truncated stream": 1}


def test_corrupt_parquet_is_one_line(tmp_path, real_data):
    write_stack_parquet(tmp_path / "stack", real_data, files=1)
    broken = _truncate(tmp_path / "stack" / "data-00000.parquet", 0.5)
    with pytest.raises(BuildError, match=rf"^{broken}: not a readable parquet file"):
        read_all("stack", [broken])
