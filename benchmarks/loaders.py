"""Packed-block loading throughput of ``ltsgen.loaders`` against the loaders a user would pick instead.

The same tokenized documents (generated once, written as ltsgen parquet and tar shards and converted once
to MosaicML's MDS) are shuffled, packed into [8, seq_len + 1] int64 blocks with EOS between documents and
read through a torch DataLoader, by:

- ltsgen          ``StreamingDataset(dir, seq_len=...)`` on the parquet shards (also with ``shuffle_window=1``,
                  and on the tar shards; "ltsgen-mix": a mixture ``{dir: 0.5, copy of dir: 0.5}``, the cost
                  of mixing two sources against reading one)
- webdataset      ``webdataset.WebDataset`` over the tar shards, a 1,000-document shuffle buffer, a packer
- HF datasets     ``load_dataset("parquet", streaming=True)`` over the parquet shards, ``shuffle(buffer_size=1000)``
- MosaicML        ``streaming.StreamingDataset`` over MDS shards
- flat memmap     one uint16 array + offsets, vectorised packing in the main process (the limit, not a loader)

Two datasets: "lts" (log-normal lengths, median ~393 tokens, as LongTinyStories) and "c4" (one C4 length
bucket, 512-1023 tokens), each in ``--shards`` shards (8: ~3 MB parquet shards). Each (system, workers)
runs in a fresh process, which reports the median tokens/s of ``--epochs`` epochs and its peak RSS (with
its DataLoader workers). The first batch of a freshly constructed loader (construction included, imports
excluded) and the first batch after resuming mid-epoch are measured with 0 workers in ``--repeats`` more
fresh processes per system, taken in turns so that a busy machine slows every system alike; the tables
give their medians. Ratios are against the fastest peer in the same run.

Epoch 1 (every shard read and decoded) is reported beside the median of the later epochs, with the CPU
time of the process and its workers per million tokens, and ltsgen's 1/2/4-worker tokens/s over its own
0-worker figure. A last table (``--workers-only`` runs it alone) gives one epoch with each worker count
against 0 workers for: pre-made batches through the DataLoader, one or 32 per message (the ceiling of the
loader's messages), the packed stored ids, and C4 records (the repository's sample) tokenized by a
``transform`` in the process that serves them, with the cores each setting keeps busy: those of the
0-worker process bound what workers can add on this machine.

    python benchmarks/loaders.py [--docs 20000] [--shards 8] [--epochs 3] [--workers 0,1,2,4] [--datasets lts,c4]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

BATCH = 8
EOS = 0
VOCAB = 8192
SHUFFLE_BUFFER = 1000
SYSTEMS = (
    "ltsgen",
    "ltsgen-w1",
    "ltsgen-tar",
    "ltsgen-mix",
    "webdataset",
    "hf-datasets",
    "mosaicml",
    "flat-memmap",
)


# ---------------------------------------------------------------------------- data


def document_lengths(kind: str, docs: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "lts":
        return np.maximum(1, rng.lognormal(np.log(393), 1.0, docs)).astype(np.int64)
    return rng.integers(512, 1024, docs)


def data_dir(root: Path, kind: str, docs: int, shards: int) -> Path:
    return root / f"{kind}-{docs}-{shards}"


def write_data(root: Path, kind: str, docs: int, shards: int) -> Path:
    """Tokenized documents as ltsgen parquet and tar directories, MDS shards and a flat memmap."""
    from ltsgen.loaders.contract import Manifest, write_manifest
    from ltsgen.shards import ShardWriter

    directory = data_dir(root, kind, docs, shards)
    if (directory / "done").exists():
        copy_for_mixture(directory)
        return directory
    rng = np.random.default_rng(0)
    lengths = document_lengths(kind, docs, rng)
    tokens = rng.integers(1, VOCAB, int(lengths.sum()), dtype=np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    per_shard = -(-docs // shards)
    for fmt, ext in (("parquet", "parquet"), ("webdataset", "tar")):
        infos = []
        for shard in range(shards):
            relpath = f"train/shard-{shard:05d}.{ext}"
            with ShardWriter(directory / fmt, relpath, fmt, token_dtype="uint16") as writer:
                for i in range(shard * per_shard, min(docs, (shard + 1) * per_shard)):
                    ids = tokens[offsets[i] : offsets[i + 1]]
                    writer.write({"id": f"d{i}", "text": "x", "source": kind, "input_ids": ids})
            infos.append(writer.info)
        tokenizer = {"path": "tokenizer.json", "vocab_size": VOCAB, "eos_id": EOS}
        builder = {"name": "benchmark", "version": "0", "arguments": {}}
        write_manifest(directory / fmt, Manifest(kind, fmt, {"train": infos}, builder, tokenizer))
    mosaic = import_mosaic()
    if mosaic is not None:
        with mosaic.MDSWriter(out=str(directory / "mds"), columns={"input_ids": "ndarray:uint16"}) as writer:
            for i in range(docs):
                writer.write({"input_ids": tokens[offsets[i] : offsets[i + 1]]})
    np.save(directory / "tokens.npy", tokens)
    np.save(directory / "offsets.npy", offsets)
    copy_for_mixture(directory)
    (directory / "done").touch()
    return directory


def copy_for_mixture(directory: Path) -> None:
    """A second parquet directory with the same shards: "ltsgen-mix" mixes it with the first, so that its
    tokens/s compare with "ltsgen" on the same data."""
    if not (directory / "parquet-copy").exists():
        shutil.copytree(directory / "parquet", directory / "parquet-copy.tmp")
        os.replace(directory / "parquet-copy.tmp", directory / "parquet-copy")


def import_mosaic():
    """MosaicML streaming's core (its package ``__init__`` also imports vision extras that need torchvision)."""
    if "streaming" not in sys.modules:
        spec = importlib.util.find_spec("streaming")
        if spec is None or spec.submodule_search_locations is None:
            return None
        package = types.ModuleType("streaming")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = package
    import streaming.base as base

    return base


# ---------------------------------------------------------------------------- peers' packing


def pack_documents(documents, block: int):
    """The packer a peer pipeline needs: documents in, blocks of ``block`` int64 ids with EOS between out."""
    import torch

    buffer = np.empty(0, dtype=np.int64)
    for ids in documents:
        buffer = np.concatenate([buffer, np.asarray(ids, dtype=np.int64), [EOS]])
        while len(buffer) >= block:
            yield torch.from_numpy(buffer[:block].copy())
            buffer = buffer[block:]


def packed(iterable_factory, block: int):
    import torch

    class Packed(torch.utils.data.IterableDataset):
        def __init__(self):
            self.source = iterable_factory()

        def __iter__(self):
            return pack_documents(self.source, block)

    return Packed()


# ---------------------------------------------------------------------------- one system in one process


def run_system(system: str, directory: Path, workers: int, epochs: int, seq_len: int) -> dict:
    """Throughput (median tokens/s of ``epochs`` epochs), the first batch of this run, and peak RSS."""
    import torch

    torch.set_num_threads(1)
    block = seq_len + 1
    warm_imports(system)
    begin = time.perf_counter()
    make_epoch, _ = build(system, directory, workers, seq_len)
    cpu_before = _cpu_seconds()
    result = time_epochs(make_epoch, epochs, block, begin)
    result["tokens_per_s"] = statistics.median(result["rates"])
    result["epoch1_tokens_per_s"] = result["rates"][0]
    if epochs > 1:
        result["later_tokens_per_s"] = statistics.median(result["rates"][1:])
    result["samples_per_s"] = result["tokens_per_s"] / block
    # CPU of this process and its DataLoader workers (ended at each epoch's end) per million tokens
    result["cpu_s_per_mtok"] = (_cpu_seconds() - cpu_before) / (epochs * result["tokens_per_epoch"] / 1e6)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    largest_worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["peak_rss_mb"] = (own + workers * largest_worker) / 1024
    return result


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_epochs(make_epoch, epochs: int, block: int, begin: float) -> dict:
    """Read ``epochs`` epochs of [BATCH, block] int64 batches from ``make_epoch(epoch)``.

    Returns:
        ``first_batch_s`` (from ``begin``, a ``perf_counter`` time), ``rates`` (tokens/s of each epoch)
        and ``tokens_per_epoch``.
    """
    import torch

    result: dict = {"rates": []}
    for epoch in range(epochs):
        start = time.perf_counter()
        tokens = 0
        for number, batch in enumerate(make_epoch(epoch)):
            if number == 0 and epoch == 0:
                result["first_batch_s"] = time.perf_counter() - begin
            assert batch.shape == (BATCH, block) and batch.dtype == torch.int64, batch.shape
            tokens += batch.numel()
        result["rates"].append(tokens / (time.perf_counter() - start))
        result["tokens_per_epoch"] = tokens
    return result


def first_batches(system: str, directory: Path, seq_len: int) -> dict:
    """In a fresh process with 0 workers: seconds to the first batch of a new loader (construction
    included), then to the first batch of another new loader resumed mid-epoch (where the system can)."""
    import torch

    torch.set_num_threads(1)
    warm_imports(system)
    begin, begin_cpu = time.perf_counter(), time.process_time()
    make_epoch, resume = build(system, directory, 0, seq_len)
    next(iter(make_epoch(0)))
    result = {
        "first_batch_s": time.perf_counter() - begin,
        "first_batch_cpu_s": time.process_time() - begin_cpu,
    }
    if resume is not None:
        result["resume_s"], result["resume_cpu_s"] = resume()
    return result


def warm_imports(system: str) -> None:
    """Import a system's modules before the clock starts, then collect the garbage the imports left: the
    first batch is about the data, not about imports or a full collection that their objects would trigger
    at an arbitrary later moment (~70 ms with torch loaded, whichever system allocates next). A DataLoader
    batch is taken too: torch's first one in a process imports its profiler's CUPTI monitor (20-50 ms),
    for every system alike."""
    import torch

    _import_system(system)
    next(iter(torch.utils.data.DataLoader([0])))
    gc.collect()


def _import_system(system: str) -> None:
    if system.startswith("ltsgen"):
        import pyarrow.parquet  # noqa: F401

        import ltsgen.loaders.dataset  # noqa: F401
    elif system == "webdataset":
        import webdataset  # noqa: F401
    elif system == "hf-datasets":
        import datasets  # noqa: F401
    elif system == "mosaicml":
        import_mosaic()


def build(system: str, directory: Path, workers: int, seq_len: int):
    """``(epoch -> iterable of [8, block] batches, resume -> seconds to the first batch after a mid-epoch resume)``."""
    import torch

    block = seq_len + 1
    if system.startswith("ltsgen"):
        from ltsgen.loaders import StreamingDataset

        path = directory / ("webdataset" if system == "ltsgen-tar" else "parquet")
        if system == "ltsgen-mix":
            path = {str(path): 0.5, str(directory / "parquet-copy"): 0.5}
        window = 1 if system == "ltsgen-w1" else 4
        dataset = StreamingDataset(path, seq_len=seq_len, batch_size=BATCH, seed=0, shuffle_window=window)
        loader = dataset.loader(num_workers=workers)

        def epoch_batches(epoch):
            dataset.set_epoch(epoch)
            return (batch["input_ids"] for batch in loader)

        def resume():
            state = dataset.state_dict()
            state["samples_consumed"] = (dataset.num_batches // 2) * BATCH
            start, start_cpu = time.perf_counter(), time.process_time()
            fresh = StreamingDataset(path, seq_len=seq_len, batch_size=BATCH, seed=0, shuffle_window=window)
            fresh.load_state_dict(state)
            next(iter(fresh.loader(num_workers=0)))
            return time.perf_counter() - start, time.process_time() - start_cpu

        return epoch_batches, resume

    if system == "webdataset":
        import webdataset as wds

        urls = sorted(str(p) for p in (directory / "webdataset" / "train").glob("*.tar"))

        def epoch_batches(epoch):
            source = (
                wds.WebDataset(urls, shardshuffle=len(urls), seed=epoch, empty_check=False)
                .shuffle(SHUFFLE_BUFFER)
                .decode()
                .to_tuple("input_ids.npy")
            )
            dataset = packed(lambda: (ids for (ids,) in source), block)
            return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers, drop_last=True)

        return epoch_batches, None

    if system == "hf-datasets":
        from datasets import load_dataset

        files = sorted(str(p) for p in (directory / "parquet" / "train").glob("*.parquet"))
        stream = load_dataset("parquet", data_files=files, split="train", streaming=True).select_columns(
            ["input_ids"]
        )
        shuffled = stream.shuffle(seed=0, buffer_size=SHUFFLE_BUFFER)

        def epoch_batches(epoch):
            shuffled.set_epoch(epoch)
            dataset = packed(lambda: (row["input_ids"] for row in shuffled), block)
            return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers, drop_last=True)

        def resume():
            iterator = iter(shuffled)
            for _ in range(len(np.load(directory / "offsets.npy")) // 2):
                next(iterator)
            state = shuffled.state_dict()
            start, start_cpu = time.perf_counter(), time.process_time()
            shuffled.load_state_dict(state)
            dataset = packed(lambda: (row["input_ids"] for row in shuffled), block)
            next(iter(torch.utils.data.DataLoader(dataset, batch_size=BATCH)))
            return time.perf_counter() - start, time.process_time() - start_cpu

        return epoch_batches, resume

    if system == "mosaicml":
        mosaic = import_mosaic()
        mosaic.util.clean_stale_shared_memory()

        dataset = mosaic.StreamingDataset(local=str(directory / "mds"), shuffle=True, batch_size=BATCH)

        def epoch_batches(epoch):
            wrapped = packed(lambda: (sample["input_ids"] for sample in dataset), block)
            return torch.utils.data.DataLoader(wrapped, batch_size=BATCH, num_workers=workers, drop_last=True)

        def resume():
            state = dataset.state_dict(num_samples=dataset.num_samples // 2, from_beginning=True)
            start, start_cpu = time.perf_counter(), time.process_time()
            dataset.load_state_dict(state)
            wrapped = packed(lambda: (sample["input_ids"] for sample in dataset), block)
            next(iter(torch.utils.data.DataLoader(wrapped, batch_size=BATCH)))
            return time.perf_counter() - start, time.process_time() - start_cpu

        return epoch_batches, resume

    if system == "flat-memmap":
        tokens = np.load(directory / "tokens.npy", mmap_mode="r")
        offsets = np.load(directory / "offsets.npy")
        lengths = np.diff(offsets) + 1  # with EOS

        def epoch_batches(epoch):
            order = np.random.default_rng(epoch).permutation(len(lengths))
            starts = np.concatenate([[0], np.cumsum(lengths[order])[:-1]])
            source = np.arange(int(lengths.sum())) + np.repeat(offsets[:-1][order] - starts, lengths[order])
            stream = np.append(tokens, EOS)[np.minimum(source, len(tokens))]
            stream[starts + lengths[order] - 1] = EOS
            count = len(stream) // (block * BATCH)
            blocks = stream[: count * block * BATCH].reshape(count, BATCH, block)
            return (torch.from_numpy(b.astype(np.int64)) for b in blocks)

        return epoch_batches, None
    raise ValueError(system)


# ---------------------------------------------------------------------------- DataLoader workers

SCALING_CASES = ("ipc-batch", "ipc-run", "ids", "tokenize")
C4_SAMPLE = (
    Path(__file__).resolve().parents[1] / "tests/fixtures/c4_en/c4-train.00000-of-01024.first400.jsonl"
)


def write_text_data(root: Path, docs: int, shards: int) -> Path:
    """An untokenized parquet dataset of ``docs`` C4 documents (the 400 of the repository's sample, repeated)
    in ``shards`` shards, with a 4,096-token BPE trained on them in ``tokenizer.json``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from ltsgen.loaders.contract import Manifest, write_manifest
    from ltsgen.shards import ShardWriter

    directory = root / "text"
    if (directory / "done").exists():
        return directory
    texts = [json.loads(line)["text"] for line in C4_SAMPLE.read_text().splitlines()]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=4096, special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    per_shard, infos = -(-docs // shards), []
    for shard in range(shards):
        with ShardWriter(directory, f"train/shard-{shard:05d}.parquet", "parquet") as writer:
            for i in range(shard * per_shard, min(docs, (shard + 1) * per_shard)):
                writer.write({"id": f"d{i}", "text": texts[i % len(texts)], "source": "c4"})
        infos.append(writer.info)
    builder = {"name": "benchmark", "version": "0", "arguments": {}}
    write_manifest(
        directory, Manifest("c4", "parquet", {"train": infos}, builder, {"path": "tokenizer.json"})
    )
    (directory / "done").touch()
    return directory


class Tokenize:
    """A record's text tokenized (the transform of the "tokenize" case: per-record work where it is served)."""

    def __init__(self, path: Path) -> None:
        self.path, self.tokenizer = str(path), None

    def __call__(self, record: dict) -> dict:
        if self.tokenizer is None:
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(self.path)
        return {"input_ids": np.asarray(self.tokenizer.encode(record["text"]).ids, dtype=np.uint16)}


def premade_batches(batches: int, run: int, block: int):
    """The DataLoader's cost alone: [BATCH, block] uint16 batches made once, ``run`` per message, turned into
    int64 tensors in the main process as ``StreamingDataset.loader()`` does (its ceiling)."""
    import torch

    class Premade(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
            made = np.random.default_rng(0).integers(1, VOCAB, (run * BATCH, block)).astype(np.uint16)
            for _ in range(worker, batches // run, workers):
                yield made.copy()

    def batches_of(loader):
        for item in loader:
            for start in range(0, run * BATCH, BATCH):
                yield torch.from_numpy(item[start : start + BATCH].astype(np.int64))

    return Premade(), batches_of


def scaling_case(case: str, directory: Path, workers: int, seq_len: int) -> dict:
    """One epoch of ``case`` with ``workers`` DataLoader workers: tokens/s, and CPU seconds of this process
    and of it with its workers."""
    import torch

    torch.set_num_threads(1)
    warm_imports("ltsgen")
    from ltsgen.loaders import StreamingDataset

    if case.startswith("ipc"):
        batches = int(np.load(directory / "offsets.npy")[-1]) // (BATCH * (seq_len + 1))
        dataset, batches_of = premade_batches(batches, 1 if case == "ipc-batch" else 32, seq_len + 1)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, collate_fn=_as_is)
        epoch = batches_of(loader)
    elif case == "ids":
        dataset = StreamingDataset(directory / "parquet", seq_len=seq_len, batch_size=BATCH, seed=0)
        epoch = (batch["input_ids"] for batch in dataset.loader(num_workers=workers))
    else:
        text = directory.parent / "text"
        tokenize = Tokenize(text / "tokenizer.json")
        dataset = StreamingDataset(text, columns=["text"], transform=tokenize, batch_size=BATCH, seed=0)
        epoch = (batch["input_ids"] for batch in dataset.loader(num_workers=workers))
    start, own, every = time.perf_counter(), time.process_time(), _cpu_seconds()
    tokens = sum(b.numel() if hasattr(b, "numel") else sum(len(ids) for ids in b) for b in epoch)
    wall = time.perf_counter() - start
    return {
        "tokens_per_s": tokens / wall,
        "main_cpu_s": time.process_time() - own,
        "cpu_s": _cpu_seconds() - every,
        "wall_s": wall,
    }


def _as_is(item):
    return item


def worker_scaling(directory: Path, workers: list[int], rounds: int, seq_len: int) -> None:
    """Each case's epoch-1 tokens/s with 1, 2, 4 ... workers over 0, fresh processes taken in turns."""
    results: dict[tuple[str, int], list[dict]] = {}
    for _ in range(rounds):
        for case in SCALING_CASES:
            for count in workers:
                done = child(["--seq-len", str(seq_len), "--scaling", case, str(directory), str(count)])
                if isinstance(done, dict):
                    results.setdefault((case, count), []).append(done)
    print(
        f"\n## DataLoader workers against 0 workers: one epoch, medians of {rounds} fresh processes in turns; "
        f"CPU: the main process (all processes)\n"
    )
    print("| case | workers | M tokens/s | over 0 workers | CPU s per epoch | cores busy |")
    print("|---|---|---|---|---|---|")
    for case in SCALING_CASES:
        base = results.get(("ids" if case.startswith("ipc") else case, 0))  # the ceiling against the loader
        for count in workers:
            runs = results.get((case, count))
            if not runs:
                continue
            rate = statistics.median(r["tokens_per_s"] for r in runs)
            over = f"{rate / statistics.median(r['tokens_per_s'] for r in base):.2f}x" if base else "-"
            main_cpu, cpu = (statistics.median(r[k] for r in runs) for k in ("main_cpu_s", "cpu_s"))
            print(
                f"| {case} | {count} | {rate / 1e6:.2f} | {over} | {main_cpu:.2f} ({cpu:.2f}) "
                f"| {_cores_busy(runs):.2f} |"
            )
    print(
        "\nipc-batch / ipc-run: pre-made [8, 1025] uint16 batches through the DataLoader, 1 or 32 per message, "
        "made int64 in the main process (the ceiling of the loader's messages; over ids' 0 workers); ids: the "
        "lts stored ids packed by StreamingDataset.loader(); tokenize: C4 records tokenized by a transform "
        "where they are served; cores busy: CPU seconds of all processes over the epoch's wall seconds"
    )
    from ltsgen.loaders.reader import usable_cpus

    cores = usable_cpus()  # the CPUs the loader sizes its decoding threads by
    for case in ("ids", "tokenize"):
        if results.get((case, 0)):
            busy = _cores_busy(results[(case, 0)])
            print(
                f"{case}: 0 workers keep {busy:.2f} of the {cores} cores busy, so workers can reach at most "
                f"{cores / busy:.2f}x the 0-worker tokens/s here, before any cost of their own"
            )


def _cores_busy(runs: list[dict]) -> float:
    """The median over ``runs`` of the CPU seconds of all processes per wall-clock second of the epoch."""
    return statistics.median(r["cpu_s"] / r["wall_s"] for r in runs)


# ---------------------------------------------------------------------------- shuffle quality


def shuffle_quality(docs: int, shards: int) -> None:
    """How well an epoch order mixes: ltsgen's shuffle windows against a webdataset-style shuffle buffer.

    displacement: mean |epoch position - stored position| / documents (a uniform shuffle gives 1/3);
    same shard: share of neighbouring documents in the epoch that come from one shard (uniform: 1/shards);
    batch shards: distinct shards among the 8 documents of a batch (uniform: about 8).
    """
    from ltsgen.loaders.order import EpochOrder

    sizes = [docs // shards] * shards
    orders = {}
    for window in (1, 2, 4, 8):
        order = EpochOrder(tuple(sizes), seed=0, epoch=0, shuffle=True, window=window)
        parts = [order.window_items(w) for w in range(order.num_windows)]
        shard_of = np.concatenate([p[0] for p in parts])
        orders[f"ltsgen shuffle_window={window}"] = shard_of * sizes[0] + np.concatenate(
            [p[1] for p in parts]
        )
    rng = np.random.default_rng(0)
    stored = list(
        np.concatenate([np.arange(s * sizes[0], (s + 1) * sizes[0]) for s in rng.permutation(shards)])
    )
    buffer, out = [], []
    for item in stored:  # webdataset's shuffle(1000): a buffer of 1,000, a random one out per one in
        buffer.append(item)
        if len(buffer) >= SHUFFLE_BUFFER:
            out.append(buffer.pop(rng.integers(len(buffer))))
    out += [buffer.pop(rng.integers(len(buffer))) for _ in range(len(buffer))]
    orders["webdataset shuffle(1000), shards shuffled"] = np.asarray(out)
    orders["uniform permutation"] = rng.permutation(docs)
    print(f"\n## Shuffle quality: {docs:,} documents in {shards} shards\n")
    print("| order | displacement | same shard neighbours | shards per batch of 8 |")
    print("|---|---|---|---|")
    for name, order in orders.items():
        displacement = np.abs(order - np.arange(len(order))).mean() / len(order)
        shard = order // sizes[0]
        same = (shard[1:] == shard[:-1]).mean()
        per_batch = np.mean([len(set(shard[i : i + 8])) for i in range(0, len(shard) - 7, 8)])
        print(f"| {name} | {displacement:.3f} | {same:.3f} | {per_batch:.2f} |")


# ---------------------------------------------------------------------------- driver


def held_in_memory(shards: int) -> str | None:
    """What ltsgen's later epochs read when a dataset's shards fit its reader (2 windows of 4 shards)."""
    if shards > 8:
        return None
    return (
        f"ltsgen's later epochs with 0 workers read the {shards} shards held decoded in memory since epoch 1 "
        "(its reader keeps the 8 most recent): no shard is read again; with workers, each epoch decodes them again"
    )


def available(system: str) -> str | None:
    """None when the system can run here, else why not."""
    need = {"webdataset": "webdataset", "hf-datasets": "datasets", "mosaicml": "streaming"}.get(system)
    if need and need not in sys.modules and importlib.util.find_spec(need) is None:
        return "not installed"
    return None


def temporary_folder(prefix: str) -> Path:
    """A new temporary folder, removed when this process exits (the default --data of a run)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per first-batch measurement")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--workers", default="0,1,2,4")
    parser.add_argument("--datasets", default="lts,c4")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--data", type=Path, help="where to keep the generated data (default: a temp dir)")
    parser.add_argument("--run", nargs=3, metavar=("SYSTEM", "DIR", "WORKERS"), help=argparse.SUPPRESS)
    parser.add_argument("--first", nargs=2, metavar=("SYSTEM", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--scaling", nargs=3, metavar=("CASE", "DIR", "WORKERS"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--workers-only", action="store_true", help="only the table of DataLoader workers against 0 workers"
    )
    parser.add_argument(
        "--write", nargs=4, metavar=("ROOT", "KIND", "DOCS", "SHARDS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.write:
        write_data(Path(args.write[0]), args.write[1], int(args.write[2]), int(args.write[3]))
        return
    if args.run:
        system, directory, workers = args.run
        print(json.dumps(run_system(system, Path(directory), int(workers), args.epochs, args.seq_len)))
        return
    if args.first:
        print(json.dumps(first_batches(args.first[0], Path(args.first[1]), args.seq_len)))
        return
    if args.scaling:
        case, directory, count = args.scaling
        print(json.dumps(scaling_case(case, Path(directory), int(count), args.seq_len)))
        return
    root = args.data or temporary_folder("ltsgen-bench-loaders-")
    workers = [int(w) for w in args.workers.split(",")]
    if args.workers_only:
        run_worker_scaling(root, args, workers)
        return
    systems = [s for s in args.systems.split(",") if available(s) is None]
    for kind in args.datasets.split(","):
        # written by a child process: the driver stays small, and peak RSS is inherited across fork and exec
        write = ["--write", str(root), kind, str(args.docs), str(args.shards)]
        subprocess.run([sys.executable, __file__, *write], check=True)
        directory = data_dir(root, kind, args.docs, args.shards)
        lengths = np.diff(np.load(directory / "offsets.npy"))
        shard_mb = np.mean([p.stat().st_size for p in (directory / "parquet" / "train").iterdir()]) / 1e6
        rows = []
        for system in args.systems.split(","):
            for count in workers:
                if system == "flat-memmap" and count:
                    continue
                row = {"system": system, "workers": count, "why": available(system)}
                if row["why"] is None:
                    done = child([*common(args), "--run", system, str(directory), str(count)])
                    row.update(done if isinstance(done, dict) else {"why": done})
                rows.append(row)
        firsts: dict[str, list[dict]] = {system: [] for system in systems}
        for _ in range(args.repeats):  # in turns: a busy moment slows every system alike
            for system in systems:
                done = child([*common(args), "--first", system, str(directory)])
                if isinstance(done, dict):
                    firsts[system].append(done)
        for row in rows:
            measured = firsts.get(row["system"]) if row["workers"] == 0 else None
            if measured:
                for key in ("first_batch_s", "first_batch_cpu_s", "resume_s", "resume_cpu_s"):
                    if all(key in m for m in measured):
                        row[key] = statistics.median(m[key] for m in measured)
        print(
            f"\n## {kind}: {len(lengths):,} documents, {lengths.sum() / 1e6:.1f}M tokens, median length "
            f"{int(np.median(lengths))}, {args.shards} parquet shards of {shard_mb:.1f} MB; "
            f"[{BATCH}, {args.seq_len + 1}] blocks; median of {args.epochs} epochs, first batch and resume "
            f"medians of {args.repeats} fresh processes (0 workers)\n"
        )
        print(
            "| system | workers | M tokens/s epoch 1 | later epochs | CPU s per M tokens | first batch (CPU) "
            "| resume (CPU) | peak RSS |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for row in rows:
            print(format_row(row))
        if note := held_in_memory(args.shards):
            print(f"\n{note}")
        report_ratios(rows)
        report_workers(rows)
    run_worker_scaling(root, args, workers)
    shuffle_quality(args.docs, args.shards)


def run_worker_scaling(root: Path, args: argparse.Namespace, workers: list[int]) -> None:
    """The workers table on the lts data and a text dataset of 2,000 C4 documents, both written if missing."""
    subprocess.run(
        [sys.executable, __file__, "--write", str(root), "lts", str(args.docs), str(args.shards)], check=True
    )
    write_text_data(root, 2000, args.shards)
    worker_scaling(data_dir(root, "lts", args.docs, args.shards), workers, args.repeats, args.seq_len)


def common(args: argparse.Namespace) -> list[str]:
    return ["--epochs", str(args.epochs), "--seq-len", str(args.seq_len)]


def child(arguments: list[str]) -> dict | str:
    """Run this script with ``arguments`` in a fresh process: its JSON result, or why it failed."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(
        [sys.executable, __file__, *arguments], capture_output=True, text=True, env=env, timeout=1800
    )
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:100]


def format_row(row: dict) -> str:
    if row["why"]:
        return f"| {row['system']} | {row['workers']} | {row['why']} | | | | | |"
    later = f"{row['later_tokens_per_s'] / 1e6:.2f}" if "later_tokens_per_s" in row else "-"
    return (
        f"| {row['system']} | {row['workers']} | {row['epoch1_tokens_per_s'] / 1e6:.2f} | {later} | "
        f"{row['cpu_s_per_mtok']:.3f} | {_seconds(row, 'first_batch')} | {_seconds(row, 'resume')} | "
        f"{row['peak_rss_mb']:.0f} MB |"
    )


def _seconds(row: dict, key: str) -> str:
    """``0.041 s (0.035 s)``: the wall time of a measurement and, in brackets, its process CPU time."""
    if f"{key}_s" not in row:
        return "-"
    cpu = f" ({row[f'{key}_cpu_s']:.3f} s)" if f"{key}_cpu_s" in row else ""
    return f"{row[f'{key}_s']:.3f} s{cpu}"


def report_ratios(rows: list[dict]) -> None:
    for workers in sorted({r["workers"] for r in rows}):
        ran = {r["system"]: r for r in rows if r["workers"] == workers and not r["why"]}
        peers = [r for name, r in ran.items() if name in ("webdataset", "hf-datasets", "mosaicml")]
        if "ltsgen" in ran and "ltsgen-mix" in ran:
            one, mixed = ran["ltsgen"], ran["ltsgen-mix"]
            print(
                f"\nworkers={workers}: a mixture of two sources reads "
                f"{mixed['tokens_per_s'] / one['tokens_per_s']:.2f}x the tokens/s of one dataset; first batch "
                f"{mixed['first_batch_s']:.3f} s against {one['first_batch_s']:.3f} s"
            )
        if "ltsgen" not in ran or not peers:
            continue
        ours = ran["ltsgen"]
        ratios = []
        for key, name in (("epoch1_tokens_per_s", "epoch 1"), ("later_tokens_per_s", "later epochs")):
            if key in ours and all(key in r for r in peers):
                best = max(peers, key=lambda r: r[key])
                ratios.append(f"{name} {ours[key] / best[key]:.1f}x the fastest peer's ({best['system']})")
        line = f"\nworkers={workers}: ltsgen tokens/s, {'; '.join(ratios)}"
        firsts = [r for r in peers if "first_batch_s" in r]
        if "first_batch_s" in ours and firsts:
            first = min(firsts, key=lambda r: r["first_batch_s"])
            line += (
                f"; first batch {ours['first_batch_s']:.3f} s, the quickest peer's {first['first_batch_s']:.3f} s "
                f"({first['system']})"
            )
        resumable = [r for r in peers if "resume_s" in r]
        if "resume_s" in ours and resumable:
            quickest = min(resumable, key=lambda r: r["resume_s"])
            line += f"; resume {ours['resume_s']:.3f} s, {quickest['system']}'s {quickest['resume_s']:.3f} s"
        print(line)


def report_workers(rows: list[dict]) -> None:
    """ltsgen's tokens/s with 1, 2, 4 ... DataLoader workers over its own with 0, epoch 1 and later."""
    ours = {r["workers"]: r for r in rows if r["system"] == "ltsgen" and not r["why"]}
    if 0 not in ours or len(ours) < 2:
        return
    for key, name in (("epoch1_tokens_per_s", "epoch 1"), ("later_tokens_per_s", "later epochs")):
        if all(key in r for r in ours.values()):
            ratios = ", ".join(f"{w} workers {ours[w][key] / ours[0][key]:.2f}x" for w in sorted(ours) if w)
            print(f"ltsgen against its own 0 workers, {name}: {ratios}")


if __name__ == "__main__":
    main()
