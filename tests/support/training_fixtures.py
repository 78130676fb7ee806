"""A tiny story dataset and training settings shared by the training, comparison, fault and Ray tests."""

from __future__ import annotations

import json
import random
from pathlib import Path

from ltsgen.loaders.contract import Manifest, shard_relpath, write_manifest
from ltsgen.loaders.files import sha256_file
from ltsgen.shards import ShardWriter
from ltsgen.tokenizer import eos_id
from ltsgen.training import TrainConfig

WORDS = (
    "the a little girl boy dog cat saw ran went home happy sad big small red blue tree park ball friend "
    "mom dad said to and with in on was is they she he it play jump look found lost day sun wet"
).split()
PET_NAMES = ("Bobo", "Lulu", "Tiki", "Momo", "Pip")


def tiny_story(index: int, words: int) -> dict:
    """A record whose pet name is set in the first sentence and recalled, cued, in the second, mid-way and at
    the end."""
    rng = random.Random(index)
    name = rng.choice(PET_NAMES)
    first = f"Once there was a pet named {name}. The pet was called {name}. "
    half = " ".join(rng.choice(WORDS) for _ in range(words // 2))
    middle = f"{first}{half}. Then {name} ran. "
    text = (
        middle
        + " ".join(rng.choice(WORDS) for _ in range(words - words // 2))
        + f". At the end {name} came home."
    )
    uses = [first.rindex(name), middle.rindex(name), text.rindex(name)]
    cues = [[first.index("The pet"), first.index("The pet") + 18], [middle.rindex("Then"), middle.rindex("Then") + 4],
            [text.rindex("At the end"), text.rindex("At the end") + 10]]  # fmt: skip
    fact = {"name": "pet name", "value": name, "first": first.index(name), "uses": uses, "cues": cues}
    return {"id": f"tiny-{index:05d}", "text": text, "source": "lts", "meta": {"facts": [fact]}}


def write_tiny_dataset(
    directory: Path,
    *,
    train: int = 40,
    validation: int = 12,
    tokenizer=None,
    eval_lengths: tuple[int, ...] = (),
    story=tiny_story,
) -> Path:
    """Stories of 100-400 words: ``train`` in two shards, ``validation`` in one, webdataset.

    Untokenized without a ``tokenizer``; with one, every record carries ``input_ids``, the tokenizer is saved
    as DIR/tokenizer.json, ``eval/<L>/`` holds the first L tokens of each validation story that long and
    ``eval_concat/<L>/`` the validation stories joined by EOS, cut into windows of L tokens.
    """
    fmt, dtype = "webdataset", (None if tokenizer is None else "uint16")
    splits, index, stories = {}, 0, {}
    for split, count, shards in (("train", train, 2), ("validation", validation, 1)):
        infos, per_shard = [], -(-count // shards)
        for shard in range(shards):
            with ShardWriter(directory, shard_relpath(split, shard, fmt), fmt, token_dtype=dtype) as writer:
                for _ in range(min(per_shard, count - shard * per_shard)):
                    record = story(index, 100 + (index * 37) % 300)
                    if tokenizer is not None:
                        record["input_ids"] = tokenizer.encode(record["text"]).ids
                    stories.setdefault(split, []).append(record)
                    writer.write(record)
                    index += 1
            infos.append(writer.info)
        splits[split] = infos
    splits["eval"] = []
    for length in eval_lengths:
        relpath = shard_relpath("eval", 0, fmt, bucket=str(length))
        with ShardWriter(directory, relpath, fmt, token_dtype=dtype) as writer:
            for record in stories["validation"]:
                if len(record["input_ids"]) >= length:
                    text = tokenizer.decode(record["input_ids"][:length])
                    writer.write({"id": f"{record['id']}-{length}", "text": text, "source": "lts",
                                  "input_ids": record["input_ids"][:length]})  # fmt: skip
        splits["eval"].append(writer.info)
    splits["eval_concat"] = []
    if eval_lengths:  # the validation stories joined by EOS, cut into windows of L tokens
        stream = [t for record in stories["validation"] for t in [*record["input_ids"], eos_id(tokenizer)]]
    for length in eval_lengths:
        relpath = shard_relpath("eval_concat", 0, fmt, bucket=str(length))
        with ShardWriter(directory, relpath, fmt, token_dtype=dtype) as writer:
            for i in range(len(stream) // length):
                window = stream[i * length : (i + 1) * length]
                writer.write({"id": f"concat-{length}-{i:06d}", "text": tokenizer.decode(window), "source": "lts",
                              "input_ids": window})  # fmt: skip
        splits["eval_concat"].append(writer.info)
    manifest = Manifest(source="lts", format=fmt, splits=splits, builder={"name": "tests"})
    if tokenizer is not None:
        tokenizer.save(str(directory / "tokenizer.json"))
        manifest.tokenizer = {"path": "tokenizer.json", "sha256": sha256_file(directory / "tokenizer.json"),
                              "vocab_size": tokenizer.get_vocab_size(), "eos_id": eos_id(tokenizer)}  # fmt: skip
    for split in ("eval", "eval_concat"):
        if not splits[split]:
            del splits[split]
    write_manifest(directory, manifest)
    return directory


def tiny_config(data: Path, out: Path, encoding: str = "rope", **overrides) -> TrainConfig:
    settings = dict(
        data=str(data), out=str(out), encoding=encoding, train_length=32, steps=4, batch_size=4, d_model=32,
        n_layers=2, n_heads=2, vocab_size=300, device="cpu", log_every=1, lr=3e-3,
    )  # fmt: skip
    settings.update(overrides)
    return TrainConfig(**settings)


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
