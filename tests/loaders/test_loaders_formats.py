"""Shard readers on real files of every format, and the sources they come from (local, file://, http, pipe:)."""

from __future__ import annotations

import gc
import hashlib
import io
import shlex
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
from http_server import served_folder
from loader_fixtures import EOS, document, make_dataset

from ltsgen.loaders import LoaderError, StreamingDataset, read_shard
from ltsgen.loaders.contract import FORMATS, read_manifest
from ltsgen.loaders.formats import decode_shard
from ltsgen.loaders.indexed import IndexedParquet, ShardBytes, row_group_span
from ltsgen.loaders.reader import check_texts
from ltsgen.loaders.sources import join


@pytest.fixture(scope="module", params=list(FORMATS))
def dataset(request, tmp_path_factory) -> tuple[Path, str]:
    fmt = request.param
    return make_dataset(tmp_path_factory.mktemp(fmt.replace(".", "-")), [5, 4], fmt), fmt


def test_read_shard_returns_every_record_in_stored_order(dataset):
    directory, fmt = dataset
    shards = read_manifest(directory).shards("train")
    records = [r for s in shards for r in read_shard(directory / s.path, fmt)]
    assert [r["id"] for r in records] == [f"doc-{i:06d}" for i in range(9)]
    for index, record in enumerate(records):
        expected = document(index, 3 + index % 5)
        assert record["text"] == expected["text"] and record["source"] == "lts"
        assert record["num_words"] == 2 and record["num_tokens"] == len(expected["input_ids"])
        assert isinstance(record["input_ids"], np.ndarray)
        assert record["input_ids"].tolist() == expected["input_ids"].tolist()
        assert record["meta"] == {}


def test_read_shard_columns_limit_the_fields(dataset):
    directory, fmt = dataset
    path = directory / read_manifest(directory).shards("train")[0].path
    records = list(read_shard(f"file://{path}", fmt, columns=["input_ids"]))
    assert len(records) == 5
    assert all(set(r) <= {"id", "input_ids"} and "input_ids" in r for r in records)


def test_corrupt_shard_bytes_give_an_error_naming_the_shard(dataset, tmp_path):
    directory, fmt = dataset
    source = directory / read_manifest(directory).shards("train")[0].path
    data = bytearray(source.read_bytes())
    broken = tmp_path / source.name
    broken.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(LoaderError, match=broken.name):
        list(read_shard(broken, fmt))
    if fmt == "parquet":  # pyarrow's message about these bytes ends in a line break: joined, one line
        broken.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
        with pytest.raises(LoaderError, match=rf"^{broken}: corrupt parquet shard \(OSError: .*\)$") as error:
            list(read_shard(broken, fmt))
        assert "\n" not in str(error.value)


def _tar_with(name: str, kind: bytes = tarfile.REGTYPE) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.type = kind
        if kind == tarfile.SYMTYPE:
            info.linkname = "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        ("../evil.txt", tarfile.REGTYPE, "escapes"),
        ("/abs/evil.txt", tarfile.REGTYPE, "escapes"),
        ("link.txt", tarfile.SYMTYPE, "link or special"),
    ],
)
def test_tar_members_that_escape_or_link_are_refused(tmp_path, name, kind, message):
    path = tmp_path / "shard-00000.tar"
    path.write_bytes(_tar_with(name, kind))
    with pytest.raises(LoaderError, match=message):
        list(read_shard(path, "webdataset"))


@pytest.mark.parametrize(
    "ids",
    [
        "[1.7, 2.2]",
        '["5", "6"]',
        "[true, false]",
        "[1, true]",
        "[2, 1.0]",
        "[-1, 2]",
        "[4294967296]",
        "[[1], [2]]",
    ],
)
def test_jsonl_input_ids_that_are_not_integer_ids_are_refused(ids):
    import zstandard

    lines = ['{"id": "a", "text": "x", "source": "s", "input_ids": [1, 2]}',
             f'{{"id": "b", "text": "y", "source": "s", "input_ids": {ids}}}']  # fmt: skip
    data = zstandard.ZstdCompressor().compress("\n".join(lines).encode())
    with pytest.raises(LoaderError, match=r"^s.jsonl.zst: line 2: input_ids must be a list of integer ids"):
        decode_shard(data, "jsonl.zst", "s.jsonl.zst")
    good = zstandard.ZstdCompressor().compress("\n".join([lines[0], lines[0].replace('"a"', '"b"')]).encode())
    assert decode_shard(good, "jsonl.zst", "s.jsonl.zst").tokens[1].tolist() == [1, 2]


def _tar_with_pax(records: bytes) -> bytes:
    """A tar whose member k0.txt ("hi") follows a pax header holding ``records`` as written."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("PaxHeaders/k0.txt")
        info.type, info.size = tarfile.XHDTYPE, len(records)
        tar.addfile(info, io.BytesIO(records))
        info = tarfile.TarInfo("k0.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (b"13 size=-512\n", r"pax header before byte 1024 \(size '-512'\)"),  # a walk backwards: no end
        (b"0 path=a\n", r"pax header \(record at byte 0: b'0 path=a\\n'\)"),  # a record going nowhere
        (b"x path=a.txt\n", r"pax header \(record at byte 0"),
        (b"99 path=a.txt\n", r"pax header \(record at byte 0"),  # longer than the header
        (b"14 path=a.txt\n4 ", r"pax header \(record at byte 14"),
    ],
)
def test_a_corrupt_pax_header_is_one_line_naming_the_shard(records, message):
    with pytest.raises(LoaderError, match=f"^s.tar: corrupt tar {message}"):  # not a walk without end
        decode_shard(_tar_with_pax(records), "webdataset", "s.tar")
    shard = decode_shard(_tar_with_pax(b"14 path=a.txt\n"), "webdataset", "s.tar")
    assert shard.fields == {"id": ["a"], "text": ["hi"]}  # a well-formed pax name is the member's


def test_tar_decoding_keeps_no_tracked_object_per_record(tmp_path):
    """A tracked object (memoryview) kept per record triggers garbage collections in the middle of
    the first batch, a full one over the whole interpreter once enough survive (~100 ms with torch)."""
    directory = make_dataset(tmp_path, [2000], "webdataset")
    data = (directory / read_manifest(directory).shards("train")[0].path).read_bytes()
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    threshold = gc.get_threshold()
    gc.collect()
    gc.callbacks.append(count)
    gc.set_threshold(200, 10, 10)
    try:
        shard = decode_shard(data, "webdataset", "shard", ["input_ids"])
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(count)
    assert len(collections) <= 2, collections
    assert shard.num_rows == 2000
    for index in (0, 1, 999, 1999):
        assert shard.tokens[index].tolist() == document(index, 3 + index % 5)["input_ids"].tolist()


def test_tar_npy_with_an_unusual_header_is_still_read(tmp_path):
    buffer = io.BytesIO()
    ids = np.arange(5, dtype=">u2")  # big-endian: not the fixed header form, read through np.load
    body = io.BytesIO()
    np.save(body, ids)
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in (("k0.txt", b"hi"), ("k0.input_ids.npy", body.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    shard = decode_shard(buffer.getvalue(), "webdataset", "shard")
    assert shard.num_rows == 1 and shard.fields["text"] == ["hi"]
    assert shard.tokens[0].tolist() == [0, 1, 2, 3, 4]


def test_pipe_urls_are_refused_unless_allowed(dataset):
    directory, fmt = dataset
    path = directory / read_manifest(directory).shards("train")[1].path
    url = f"pipe:cat {shlex.quote(str(path))}"
    with pytest.raises(LoaderError, match="pipe: URLs run shell commands"):
        list(read_shard(url, fmt))
    with pytest.raises(LoaderError, match="allow_pipe"):
        StreamingDataset(f"pipe:cat {shlex.quote(str(directory))}/{{path}}")
    assert [r["id"] for r in read_shard(url, fmt, allow_pipe=True)] == [f"doc-{i:06d}" for i in range(5, 9)]
    template = f"pipe:cat {shlex.quote(str(directory))}/{{path}}"
    dataset = StreamingDataset(template, shuffle=False, allow_pipe=True)
    assert [r["id"] for r in dataset] == [f"doc-{i:06d}" for i in range(9)]
    with pytest.raises(LoaderError, match="exited with status"):
        list(read_shard("pipe:false", fmt, allow_pipe=True))


@pytest.fixture
def http_root(dataset):
    directory, fmt = dataset
    with served_folder(directory) as url:
        yield url, directory, fmt


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")
def test_http_dataset_streams_like_the_local_one(http_root):
    url, directory, fmt = http_root
    remote = StreamingDataset(url, seed=4, batch_size=2)
    local = StreamingDataset(directory, seed=4, batch_size=2)
    assert [r["id"] for r in remote] == [r["id"] for r in local]
    workers = StreamingDataset(url, seed=4, batch_size=2).loader(num_workers=2)  # each worker its own client
    assert [i for batch in workers for i in batch["id"]] == [
        r["id"] for r in StreamingDataset(directory, seed=4, batch_size=2)
    ]
    shard = read_manifest(directory).shards("train")[0].path
    assert len(list(read_shard(join(url, shard), fmt))) == 5
    with pytest.raises(LoaderError, match="not found"):
        StreamingDataset(url + "/missing")


def test_parquet_token_ids_decode_by_row_group_as_they_are_asked_for(tmp_path):
    lengths = np.arange(11) % 4 * 3  # some empty documents too
    directory = make_dataset(tmp_path, [11], lengths=lengths, row_group_rows=3)
    data = (directory / read_manifest(directory).shards("train")[0].path).read_bytes()
    eager = decode_shard(data, "parquet", "s", ["input_ids"]).tokens
    lazy = decode_shard(data, "parquet", "s", ["input_ids"], lazy_tokens=True).tokens
    assert lazy.row_group_starts.tolist() == [0, 3, 6, 9, 11] and lazy.decoded_groups == 0
    assert np.array_equal(lazy.offsets, eager.offsets)  # laid out from num_tokens before any ids
    lazy.load(np.asarray([5, 4]))
    assert lazy.decoded_groups == 1 and not lazy.complete
    assert [lazy[i].tolist() for i in range(3, 6)] == [eager[i].tolist() for i in range(3, 6)]
    assert lazy[10].tolist() == document(10, int(lengths[10]))["input_ids"].tolist()
    assert lazy.decoded_groups == 2
    lazy.load_all()
    assert lazy.complete and np.array_equal(lazy.values, eager.values)
    records = decode_shard(data, "parquet", "s", lazy_tokens=True).records()
    assert [r["input_ids"].tolist() for r in records] == [eager[i].tolist() for i in range(11)]


def test_parquet_text_decodes_by_row_group_as_rows_are_read_and_is_checked_as_it_is(tmp_path):
    directory = make_dataset(tmp_path, [11], row_group_rows=3)
    data = (directory / read_manifest(directory).shards("train")[0].path).read_bytes()
    eager = decode_shard(data, "parquet", "s", ["text"]).fields["text"]
    lazy = decode_shard(data, "parquet", "s", ["text"], lazy_text=True).fields["text"]
    assert len(lazy) == 11 and lazy.decoded_groups == 0
    decoded = []
    lazy.on_decode = lambda texts, first: decoded.append((first, list(texts)))
    assert lazy[4] == eager[4] and lazy.decoded_groups == 1
    assert lazy[10] == eager[10] and lazy.decoded_groups == 2
    assert list(lazy) == eager and lazy.decoded_groups == 4
    assert decoded == [(3, eager[3:6]), (9, eager[9:11]), (0, eager[0:3]), (6, eager[6:9])]
    with pytest.raises(IndexError):
        lazy[11]
    shard = decode_shard(data, "parquet", "s", ["text"], lazy_text=True)
    check_texts(shard, 10, "s")  # "document 10" alone is over: found when its row group is read
    assert shard.fields["text"][4] == "document 4"
    with pytest.raises(LoaderError, match=r"^s: record 10 has 11 characters, over max_doc_chars=10 "):
        shard.fields["text"][9]
    with pytest.raises(LoaderError, match="record 10 has 11 characters"):
        check_texts(decode_shard(data, "parquet", "s", ["text"]), 10, "s")


def _indexed_shard(tmp_path, lengths=None):
    """A shard of 11 records in row groups of 3, its manifest entry, its bytes and the row groups' spans."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = make_dataset(tmp_path, [11], lengths=lengths, row_group_rows=3)
    info = read_manifest(directory).shards("train")[0]
    path = directory / info.path
    metadata = pq.ParquetFile(pa.BufferReader(path.read_bytes())).metadata
    return info, path, [row_group_span(metadata, g) for g in range(metadata.num_row_groups)]


def test_an_indexed_shard_reads_and_checks_only_its_footer_and_the_row_groups_decoded(tmp_path):
    info, path, spans = _indexed_shard(tmp_path)
    data = path.read_bytes()
    source = ShardBytes(str(path), path=path)
    tokens = IndexedParquet(source, info.footer_sha256).tokens()
    eager = decode_shard(data, "parquet", "s", ["input_ids"]).tokens
    assert np.array_equal(tokens.offsets, eager.offsets) and tokens.decoded_groups == 0  # from the footer
    assert [tokens[i].tolist() for i in (3, 5)] == [eager[i].tolist() for i in (3, 5)]
    buffer = np.asarray(source.buffer)
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    (start, stop), last = spans[1], spans[-1][1]
    assert not buffer[:start].any() and not buffer[stop:last].any()  # row groups 0, 2 and 3 never read
    assert bytes(buffer[start:stop]) == data[start:stop] and bytes(buffer[footer:]) == data[footer:]
    tokens.load_all()
    assert tokens.complete and np.array_equal(tokens.values, eager.values)


def test_an_indexed_shards_text_is_read_and_checked_a_row_group_at_a_time(tmp_path):
    info, path, spans = _indexed_shard(tmp_path)
    data = bytearray(path.read_bytes())
    source = ShardBytes(str(path), path=path)
    texts = IndexedParquet(source, info.footer_sha256).texts()
    assert len(texts) == 11 and texts.decoded_groups == 0
    assert texts[4] == "document 4" and texts.decoded_groups == 1
    buffer = np.asarray(source.buffer)
    (start, stop), last = spans[1], spans[-1][1]
    assert not buffer[:start].any() and not buffer[stop:last].any()  # only row group 1 read
    data[spans[2][1] - 3] ^= 0xFF  # row group 2 changes on disk before it is read
    path.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=r"shard-00000.parquet: row group 2: sha256 .* does not match"):
        texts[7]
    assert texts.decoded_groups == 1 and texts[10] == "document 10"  # row group 3 is intact


def test_a_remote_shard_requests_the_row_groups_a_decode_needs_at_once_and_checks_each(tmp_path, monkeypatch):
    from ltsgen.loaders import indexed

    info, path, spans = _indexed_shard(tmp_path)
    data = bytearray(path.read_bytes())
    calls = []

    def ranges(wanted):  # what a store answers to concurrent range requests
        calls.append(list(wanted))
        return [bytes(data[start:stop]) for start, stop in wanted]

    def opened():
        calls.clear()
        return IndexedParquet(
            ShardBytes("remote", ranges=ranges, size=len(data)), info.footer_sha256
        ).tokens()

    assert opened().load(np.asarray([0, 4, 10])) is None and calls == [[(0, len(data))]]  # small: one read
    monkeypatch.setattr(indexed, "TAIL_READ", len(data) - spans[-1][1])  # a large shard's: its footer
    tokens = opened()
    assert calls == [[(spans[-1][1], len(data))]]
    tokens.load(np.asarray([0, 4, 10]))  # rows of row groups 0, 1 and 3: 0 and 1 adjacent, 3 near
    assert calls[1:] == [[(spans[0][0], spans[3][1])]]  # ranges close together: one request
    monkeypatch.setattr(indexed, "RANGE_GAP", 0)
    tokens = opened()
    tokens.load(np.asarray([0, 4, 10]))
    assert calls[1:] == [[(spans[0][0], spans[1][1]), spans[3]]]  # requested together, once
    eager = decode_shard(bytes(data), "parquet", "s", ["input_ids"]).tokens
    assert [tokens[i].tolist() for i in (0, 4, 10)] == [eager[i].tolist() for i in (0, 4, 10)]
    assert len(calls) == 2  # decoded rows need no request again
    data[spans[2][1] - 3] ^= 0xFF  # row group 2 changes on the server before it is read
    with pytest.raises(LoaderError, match=r"remote: row group 2: sha256 .* does not match"):
        tokens.load(np.asarray([7]))
    assert calls[2:] == [[spans[2]]] and tokens.decoded_groups == 3


def test_a_row_group_changed_after_opening_is_refused_before_any_of_its_ids_is_readable(tmp_path):
    info, path, spans = _indexed_shard(tmp_path)
    tokens = IndexedParquet(ShardBytes(str(path), path=path), info.footer_sha256).tokens()
    assert tokens[0].tolist() == document(0, 3)["input_ids"].tolist()
    data = bytearray(path.read_bytes())
    data[spans[2][1] - 3] ^= 0xFF  # inside row group 2 (its input_ids), same size
    path.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=r"shard-00000.parquet: row group 2: sha256 .* does not match"):
        tokens[7]
    assert tokens.decoded_groups == 1 and not tokens.complete
    assert tokens[4].tolist() == document(4, 3 + 4 % 5)["input_ids"].tolist()  # row group 1 is intact
    with pytest.raises(LoaderError, match="row group 2"):
        tokens.load_all()


def test_an_indexed_shard_with_a_changed_footer_or_no_index_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    info, path, _ = _indexed_shard(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.rindex(b"sha256") + 12  # a hex digit of the index's first sha256
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    with pytest.raises(LoaderError, match=r"s: footer sha256 .* does not match the manifest's"):
        IndexedParquet(ShardBytes("s", data=bytes(data)), info.footer_sha256)
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": ["a"]}), buffer)
    plain = buffer.getvalue()
    footer = plain[len(plain) - 8 - int.from_bytes(plain[-8:-4], "little") :]
    with pytest.raises(LoaderError, match="p: the footer has no row group index"):
        IndexedParquet(ShardBytes("p", data=plain), hashlib.sha256(footer).hexdigest())
    with pytest.raises(LoaderError, match="t: not a parquet file"):
        IndexedParquet(ShardBytes("t", data=bytes(data[:-2])), info.footer_sha256)


def test_a_row_group_whose_ids_disagree_with_num_tokens_is_refused_naming_it(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = pa.array([[1, 2], [3], [4, 5, 6], [7]], type=pa.list_(pa.uint16()))
    table = pa.table({"id": ["a", "b", "c", "d"], "num_tokens": pa.array([2, 1, 2, 2]), "input_ids": ids})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=2)
    tokens = decode_shard(buffer.getvalue(), "parquet", "bad.parquet", lazy_tokens=True).tokens
    assert tokens[1].tolist() == [3]  # the first row group agrees
    with pytest.raises(LoaderError, match="bad.parquet: row group 1: the lengths of input_ids differ"):
        tokens.load(np.asarray([3]))
    table = table.set_column(1, "num_tokens", pa.array([2, None, 3, 1]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    with pytest.raises(LoaderError, match="bad.parquet: num_tokens must be int64 without nulls"):
        decode_shard(buffer.getvalue(), "parquet", "bad.parquet", lazy_tokens=True)


def test_a_packed_window_decodes_its_other_shards_on_other_threads_and_cuts_the_same_tokens(tmp_path):
    from ltsgen.loaders.packing import PackedWindow

    directory = make_dataset(tmp_path, [7, 5, 6], row_group_rows=2)
    shards = read_manifest(directory).shards("train")

    def columns(lazy: bool):
        return [
            IndexedParquet(ShardBytes(s.path, path=directory / s.path), s.footer_sha256).tokens()
            if lazy
            else decode_shard((directory / s.path).read_bytes(), "parquet", s.path, ["input_ids"]).tokens
            for s in shards
        ]

    rng = np.random.default_rng(3)
    column_of = rng.permutation(np.repeat(np.arange(3), [7, 5, 6]))
    rows = np.empty_like(column_of)
    for c, n in enumerate([7, 5, 6]):
        rows[column_of == c] = rng.permutation(n)
    threads = []

    def background(fn, *args):
        threads.append(threading.Thread(target=fn, args=args))
        threads[-1].start()

    lazy = columns(lazy=True)
    window = PackedWindow(lazy, column_of, rows, EOS, background=background)
    expected = PackedWindow(columns(lazy=False), column_of, rows, EOS)
    assert window.total == expected.total
    ids, _ = window.slice(0, 40)
    assert np.array_equal(ids, expected.slice(0, 40)[0]) and len(threads) == 2  # one per shard but the first
    for thread in threads:
        thread.join()
    assert all(column.decoded_groups for column in lazy)  # every shard touched, two by the other threads
    ids, _ = window.slice(0, window.total)
    assert np.array_equal(ids, expected.slice(0, expected.total)[0])


def test_a_jsonl_zst_shard_is_decompressed_a_line_at_a_time_keeping_only_the_wanted_fields(tmp_path):
    import json
    import tracemalloc

    import zstandard

    records = [
        {"id": f"r{i}", "text": "x" * (4000 + i), "input_ids": [i, i + 1, 2**16 + i]} for i in range(5000)
    ]
    lines = [json.dumps(record).encode() + b"\n" for record in records]
    compressor = zstandard.ZstdCompressor(level=3)
    data = compressor.compress(b"".join(lines[:1234])) + compressor.compress(b"".join(lines[1234:]))
    assert len(data) < 100_000  # 33 MB of lines
    tracemalloc.start()
    try:
        shard = decode_shard(data, "jsonl.zst", "shard", ["id", "input_ids"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert shard.num_rows == 5000 and list(shard.fields) == ["id"]
    assert shard.fields["id"][4999] == "r4999" and shard.tokens.values.dtype == np.uint32
    assert [shard.tokens[i].tolist() for i in (0, 1233, 1234, 4999)] == [
        records[i]["input_ids"] for i in (0, 1233, 1234, 4999)
    ]
    assert peak < 8 << 20, peak  # the lines are 33 MB: they were decompressed whole, then parsed whole
    assert decode_shard(data, "jsonl.zst", "shard").fields["text"][77] == records[77]["text"]
    with pytest.raises(LoaderError, match="^shard: truncated zstd stream$"):
        decode_shard(data[:-3], "jsonl.zst", "shard")


def test_a_zstd_decompression_bomb_is_one_line_not_the_memory():
    """Before: 99 KB of frames that decompress to 3 GB without a newline filled the memory."""
    import tracemalloc

    import zstandard

    compress = zstandard.ZstdCompressor(level=19).compress
    one_line = compress(b"a" * (8 << 20)) * 9  # a line of 72 MB in a few kB
    line = b'{"id": "r", "text": "' + b"b" * (1 << 20) + b'", "source": "s"}\n'
    many = compress(line * 80)  # 80 lines of 1 MB, thousands of times their size
    for data, problem in ((one_line, "67,108,864 bytes in one line"), (many, "1,000 times its size")):
        tracemalloc.start()
        try:
            with pytest.raises(
                LoaderError, match=f"^shard: a zstd stream that decompresses to more than {problem}"
            ):
                decode_shard(data, "jsonl.zst", "shard")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 160 << 20, peak
