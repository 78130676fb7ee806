"""Shard-writing throughput of ``ltsgen.shards.ShardWriter`` against the tools a user would pick instead.

The same records (LongTinyStories stories, generated once before timing, optionally with token ids) are
written, side by side in this process, by:

- webdataset tar:  ``ShardWriter(..., "webdataset")``  vs  ``webdataset.TarWriter``
- parquet:         ``ShardWriter(..., "parquet")`` (zstd)  vs  ``datasets.Dataset.from_list(...).to_parquet``
                   (snappy: datasets fixes the codec per column)
- jsonl.zst:       ``ShardWriter(..., "jsonl.zst")``   vs  ``pandas.DataFrame(...).to_json(lines=True, compression="zstd")``
                   (``datasets``' ``to_json`` has no zstd)

Each pair writes one record untimed first (each side's imports), then repeats interleaved and the median
time counts. Ratio = peer time / ltsgen time (above 1: ltsgen is faster). ltsgen also validates every
record, counts words and hashes the shard (sha256).

    python benchmarks/shards.py [--stories 400] [--max-words 4000] [--repeats 3] [--tokens]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ltsgen.shards import ShardWriter, dump_json


def make_records(stories: int, max_words: int, tokens: bool) -> list[dict]:
    from ltsgen.stories.engine import generate_story
    from ltsgen.stories.plan import target_words

    records = []
    for index in range(stories):
        record = generate_story(index, 0, target_words(index, 0, 100, max_words))
        if tokens:
            record["input_ids"] = np.arange(record["num_words"] * 4 // 3, dtype=np.uint16)
        records.append(record)
    return records


def ours(fmt: str, tokens: bool):
    ext = {"webdataset": "tar", "parquet": "parquet", "jsonl.zst": "jsonl.zst"}[fmt]

    def write(records, directory: Path) -> None:
        with ShardWriter(directory, f"train/shard-00000.{ext}", fmt, "uint16" if tokens else None) as writer:
            for record in records:
                writer.write(record)

    return write


def webdataset_peer(records, directory: Path) -> None:
    import webdataset as wds

    with wds.TarWriter(str(directory / "peer.tar")) as sink:
        for record in records:
            sample = {"__key__": record["id"], "txt": record["text"]}
            sample["json"] = {k: v for k, v in record.items() if k not in ("text", "input_ids")}
            if "input_ids" in record:
                buffer = io.BytesIO()
                np.save(buffer, record["input_ids"], allow_pickle=False)
                sample["input_ids.npy"] = buffer.getvalue()
            sink.write(sample)


def hf_rows(records) -> list[dict]:
    rows = []
    for record in records:
        row = {**record, "meta": dump_json(record["meta"])}
        if "input_ids" in row:
            row["input_ids"] = row["input_ids"].tolist()
        rows.append(row)
    return rows


def parquet_peer(records, directory: Path) -> None:
    import datasets

    datasets.Dataset.from_list(hf_rows(records)).to_parquet(str(directory / "peer.parquet"))


def jsonl_peer(records, directory: Path) -> None:
    import pandas as pd

    rows = [{**r, "input_ids": r["input_ids"].tolist()} if "input_ids" in r else r for r in records]
    frame = pd.DataFrame(rows)
    frame.to_json(
        directory / "peer.jsonl.zst", orient="records", lines=True, compression="zstd", force_ascii=False
    )


def timed(function, records) -> float:
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        function(records, Path(directory))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stories", type=int, default=400)
    parser.add_argument("--max-words", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", action="store_true", help="records carry uint16 token ids too")
    args = parser.parse_args()

    import datasets

    datasets.disable_progress_bars()
    records = make_records(args.stories, args.max_words, args.tokens)
    megabytes = sum(len(r["text"].encode("utf-8")) for r in records) / 1e6
    print(f"{len(records)} stories, {megabytes:.1f} MB of text{', with token ids' if args.tokens else ''}")
    print(f"{'format':<11} {'ltsgen MB/s':>12} {'peer':<32} {'peer MB/s':>10} {'ratio':>6}")
    pairs = [
        ("webdataset", webdataset_peer, "webdataset.TarWriter"),
        ("parquet", parquet_peer, "datasets to_parquet (snappy)"),
        ("jsonl.zst", jsonl_peer, "pandas to_json (zstd)"),
    ]
    for fmt, peer, peer_name in pairs:
        timed(ours(fmt, args.tokens), records[:1])  # untimed: the libraries each side imports on first use
        timed(peer, records[:1])  # (webdataset's import alone takes about 1 s)
        mine, theirs = [], []
        for _ in range(args.repeats):
            mine.append(timed(ours(fmt, args.tokens), records))
            theirs.append(timed(peer, records))
        ours_s, peer_s = statistics.median(mine), statistics.median(theirs)
        print(
            f"{fmt:<11} {megabytes / ours_s:>12.1f} {peer_name:<32} {megabytes / peer_s:>10.1f} "
            f"{peer_s / ours_s:>6.2f}"
        )


if __name__ == "__main__":
    main()
