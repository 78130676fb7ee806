"""The first packed batch of story text tokenized on the fly, fresh and resumed, against HF datasets streaming.

Two LongTinyStories datasets, ``--small`` and ``--large`` stories (``ltsgen stories`` with its defaults:
parquet text, up to 32 MB per shard), and a 4,096-token byte-level BPE trained on the small one's training
split. The first batch ([8, 513] token ids, documents packed with EOS between them) is timed in a fresh
process per measurement, with 0 workers, the libraries imported before the clock:

- ltsgen      ``StreamingDataset(dir, seq_len=512, batch_size=8, tokenizer=..., token_counts=FILE)``, with
              the counts file a first construction wrote (as ``ltsgen train`` keeps ``RUN/token_counts.json``
              for its resumes): a new loader's first batch, and a new loader's first batch once resumed
              from the state half-way through the epoch.
- HF datasets ``load_dataset("parquet", streaming=True)`` over the same shards, ``shuffle(buffer_size=1000)``,
              ``map`` tokenizing 32 texts at a time, packed the same way: its first batch, and its first
              batch after ``load_state_dict`` of its state half-way through the epoch (HF refills the
              shuffle buffer on resume). Without the 5 s that datasets sleeps whenever a source file runs
              out (``config.SLEEP_TIME_ON_THREADS_SHUTDOWN``), which the buffer's first fill hits here.

Measurements are taken in turns (a busy machine slows both alike); the table gives medians of
``--repeats`` and each system's large over small (a first batch that does not grow with the dataset: 1.0).

    python benchmarks/text_first_batch.py [--small 300] [--large 3000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

SEQ_LEN = 512
BATCH = 8
VOCAB = 4096
SHUFFLE_BUFFER = 1000
MAP_BATCH = 32
SYSTEMS = ("ltsgen", "hf-datasets")


def build_stories(out: Path, stories: int) -> Path:
    """``ltsgen stories --num-stories stories`` into ``out`` (kept between runs)."""
    if not (out / "manifest.json").exists():
        command = [sys.executable, "-m", "ltsgen", "stories", "--out", str(out), "--num-stories", str(stories),
                   "--no-progress", "--no-card"]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def train_files(directory: Path) -> list[str]:
    return sorted(str(path) for path in (directory / "train").glob("*.parquet"))


def texts_of(directory: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [
        text
        for path in train_files(directory)
        for text in pq.read_table(path, columns=["text"])["text"].to_pylist()
    ]


def prepare(root: Path, small: int, large: int) -> dict[str, Path]:
    """The two datasets, the tokenizer, the ltsgen token counts and both systems' mid-epoch states."""
    from ltsgen.tokenizer import train_tokenizer

    datasets = {"small": build_stories(root / f"stories-{small}", small),
                "large": build_stories(root / f"stories-{large}", large)}  # fmt: skip
    tokenizer = root / "tokenizer.json"
    if not tokenizer.exists():
        train_tokenizer(texts_of(datasets["small"]), VOCAB).save(str(tokenizer))
    for directory in datasets.values():
        for system in SYSTEMS:
            state = directory.with_name(f"{directory.name}.{system}.state.json")
            if not state.exists():
                state.write_text(json.dumps(mid_epoch_state(system, directory, tokenizer)))
    return datasets


# ---------------------------------------------------------------------------- the two loaders


def ltsgen_loader(directory: Path, tokenizer: Path):
    from ltsgen.loaders import StreamingDataset

    counts = directory.with_name(f"{directory.name}.token_counts.json")
    return StreamingDataset(directory, "train", seed=0, seq_len=SEQ_LEN, batch_size=BATCH,
                            tokenizer=str(tokenizer), token_counts=counts)  # fmt: skip


def hf_stream(directory: Path, tokenizer: Path):
    import datasets
    from tokenizers import Tokenizer

    # datasets sleeps this long (5 s) each time a source file runs out while the shuffle buffer fills,
    # "to let PyArrow close threads gracefully": left out, so that the table compares work, not a pause
    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0
    encoder = Tokenizer.from_file(str(tokenizer))

    def tokenize(rows):
        return {"input_ids": [e.ids for e in encoder.encode_batch(rows["text"], add_special_tokens=False)]}

    stream = datasets.load_dataset(
        "parquet", data_files=train_files(directory), split="train", streaming=True
    )
    shuffled = stream.select_columns(["text"]).shuffle(seed=0, buffer_size=SHUFFLE_BUFFER)
    return shuffled.map(tokenize, batched=True, batch_size=MAP_BATCH, remove_columns=["text"])


def hf_first_batch(stream, eos: int) -> list[list[int]]:
    """The first [BATCH, SEQ_LEN + 1] block of ``stream``'s documents packed with ``eos`` after each."""
    need, tokens = BATCH * (SEQ_LEN + 1), []
    for row in stream:
        tokens.extend(row["input_ids"])
        tokens.append(eos)
        if len(tokens) >= need:
            break
    return [tokens[i * (SEQ_LEN + 1) : (i + 1) * (SEQ_LEN + 1)] for i in range(BATCH)]


def eos_id(tokenizer: Path) -> int:
    from tokenizers import Tokenizer

    from ltsgen.tokenizer import EOS_TOKEN

    return Tokenizer.from_file(str(tokenizer)).token_to_id(EOS_TOKEN)


def mid_epoch_state(system: str, directory: Path, tokenizer: Path) -> dict:
    """The system's state half-way through the epoch (ltsgen's construction also writes its counts file)."""
    if system == "ltsgen":
        dataset = ltsgen_loader(directory, tokenizer)
        state = dataset.state_dict()
        state["samples_consumed"] = (dataset.num_batches // 2) * BATCH
        return state
    from ltsgen.loaders.contract import read_manifest

    stream = hf_stream(directory, tokenizer)
    rows = iter(stream)
    for _ in range(sum(shard.samples for shard in read_manifest(directory).shards("train")) // 2):
        next(rows)
    return stream.state_dict()


# ---------------------------------------------------------------------------- one measurement per process


def measure(system: str, directory: Path, tokenizer: Path, resumed: bool) -> dict:
    """Seconds (wall and CPU) from constructing a loader to its first batch, after the imports."""
    import pyarrow.parquet  # noqa: F401
    import torch  # noqa: F401

    if system == "ltsgen":
        import ltsgen.loaders.dataset  # noqa: F401
    else:
        import datasets  # noqa: F401
    state = json.loads(directory.with_name(f"{directory.name}.{system}.state.json").read_text())
    eos = eos_id(tokenizer)
    start, start_cpu = time.perf_counter(), time.process_time()
    if system == "ltsgen":
        dataset = ltsgen_loader(directory, tokenizer)
        if resumed:
            dataset.load_state_dict(state)
        batch = next(dataset.iter_batches())["input_ids"]
    else:
        stream = hf_stream(directory, tokenizer)
        if resumed:
            stream.load_state_dict(state)
        batch = hf_first_batch(stream, eos)
    assert len(batch) == BATCH and all(len(row) == SEQ_LEN + 1 for row in batch)
    return {"s": time.perf_counter() - start, "cpu_s": time.process_time() - start_cpu}


def child(system: str, directory: Path, tokenizer: Path, resumed: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    command = [
        sys.executable,
        __file__,
        "--measure",
        system,
        str(directory),
        str(tokenizer),
        str(int(resumed)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=300, help="stories of the small dataset")
    parser.add_argument("--large", type=int, default=3000, help="stories of the large dataset")
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per measurement")
    parser.add_argument("--data", type=Path, help="where to keep the datasets (default: a temp dir)")
    parser.add_argument("--measure", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        system, directory, tokenizer, resumed = args.measure
        print(json.dumps(measure(system, Path(directory), Path(tokenizer), resumed == "1")))
        return
    with tempfile.TemporaryDirectory() as temp:
        root = args.data or Path(temp)
        root.mkdir(parents=True, exist_ok=True)
        print("building the two datasets, the tokenizer and the mid-epoch states ...", flush=True)
        datasets = prepare(root, args.small, args.large)
        runs = [(size, directory, system, resumed) for size, directory in datasets.items()
                for system in SYSTEMS for resumed in (False, True)]  # fmt: skip
        results: dict[tuple, list[dict]] = {}
        for size, directory, system, resumed in tqdm(
            runs * args.repeats, desc="first batches", unit="process"
        ):
            done = child(system, directory, root / "tokenizer.json", resumed)
            results.setdefault((system, size, resumed), []).append(done)
    report(results, args)


def report(results: dict[tuple, list[dict]], args: argparse.Namespace) -> None:
    def median(system, size, resumed, key="s"):
        return statistics.median(r[key] for r in results[(system, size, resumed)])

    print(
        f"\n## First batch of text tokenized on the fly: medians of {args.repeats} fresh processes in turns\n"
    )
    print("| system | stories | first batch s (CPU) | resumed s (CPU) |")
    print("|---|---|---|---|")
    for system in SYSTEMS:
        for size, stories in (("small", args.small), ("large", args.large)):
            cells = [
                f"{median(system, size, r):.3f} ({median(system, size, r, 'cpu_s'):.3f})"
                for r in (False, True)
            ]
            print(f"| {system} | {stories:,} | {cells[0]} | {cells[1]} |")
    print()
    for size, stories in (("small", args.small), ("large", args.large)):
        for resumed in (False, True):
            ratio = median("hf-datasets", size, resumed) / median("ltsgen", size, resumed)
            print(
                f"{stories:,} stories, {'resumed' if resumed else 'fresh'}: HF datasets takes {ratio:.2f}x ltsgen's time"
            )
    for system in SYSTEMS:
        growth = [median(system, "large", r) / median(system, "small", r) for r in (False, True)]
        print(
            f"{system}: {args.large:,} stories over {args.small:,}: {growth[0]:.2f}x fresh, {growth[1]:.2f}x resumed"
        )


if __name__ == "__main__":
    main()
