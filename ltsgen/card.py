"""The data card of a dataset directory: ``DIR/README.md`` (a Hugging Face dataset card) and length histograms.

``write_card(DIR)`` renders any builder's manifest: a YAML header (license, language, task categories, size
category, creators, ``configs`` with the data files of each split, ``dataset_info`` with the features as
``datasets`` loads them and the split sizes), then a datasheet (motivation, composition with statistics,
collection process with the exact generator version and arguments, uses, limitations) and PNG histograms of
the sample lengths (words per split; tokens per length bucket when tokenized).

What a builder says about its data goes in ``manifest.extra["card"]``, every key optional:
``pretty_name, summary, license, language (list), task_categories, tags, annotations_creators,
language_creators ("machine-generated" or "found" ...), source_datasets, command, motivation, collection,
uses, limitations`` (the last five are Markdown paragraphs). Tables go in ``manifest.extra["statistics"]``:
section title -> ``{"columns": [...], "rows": [[...], ...]}`` (column order kept), a dict of name -> value
(a two-column table), a dict of row name -> dict (one row each) or a list of dicts (one row each). The
manifest is stored with sorted keys, so only the ``columns``/``rows`` form keeps its order.
"""

from __future__ import annotations

import io
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from ltsgen.errors import MissingDependency, first_line, require
from ltsgen.loaders.contract import (
    CARD_NAME,
    EVAL_CONCAT_SPLIT,
    EVAL_SPLIT,
    FORMATS,
    MANIFEST_NAME,
    STANDARD_SPLITS,
    Manifest,
    ShardInfo,
    bucket_order,
    read_manifest,
    token_dtype,
)
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.files import atomic_path
from ltsgen.loaders.storage import Storage, as_storage
from ltsgen.outputs import CARD_FILES, TOKENS_PLOT, WORDS_PLOT, expect_outputs, output_state, record_outputs

SIZE_CATEGORIES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
SIZE_CATEGORIES += [(10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]

PLOTS_MISSING = "the card has no length histograms: matplotlib is not installed (pip install 'ltsgen[build]')"


def can_plot() -> bool:
    """Whether matplotlib is installed to draw the card's histograms (without it the card has none)."""
    try:
        require("matplotlib.figure", "build", "length histograms")
    except MissingDependency:
        return False
    return True


def write_card(directory: str | Path | Storage, verify: bool = True) -> str:
    """Write ``DIR/README.md`` and the histogram PNGs beside it (a local folder or any ``Storage``; each
    file atomically, replacing what is there), record them as ltsgen's, and return the card's location.
    ``verify``: check each shard against the manifest's sha256 as it is read (a build that has just checked
    them need not)."""
    store = as_storage(directory)
    manifest = read_manifest(store)
    check_statistics(manifest, store.location(MANIFEST_NAME))
    lengths = _read_lengths(store, manifest, verify)
    files = _plots(manifest, lengths) if can_plot() else {}
    files[CARD_NAME] = render_card(manifest, lengths, list(files)).encode("utf-8")
    expect_outputs(store, files)  # a run killed among these writes leaves files still known as ltsgen's
    for name, data in files.items():  # the plots, then the card that shows them
        store.write_bytes(name, data)
    record_outputs(store, list(files))
    return store.location(CARD_NAME)


def card_conflict(directory: str | Path | Storage) -> str | None:
    """Why writing the card would replace a file that is not as ltsgen wrote it (one line), else None."""
    store = as_storage(directory)
    for name in CARD_FILES:
        state = output_state(store, name)
        if state == "changed":
            return f"{store.location(name)} was edited since ltsgen wrote it"
        if state == "other":
            return f"{store.location(name)} was not written by ltsgen"
    return None


def copy_card(directory: str | Path | Storage, output: str | Path) -> Path:
    """Copy ``DIR/README.md`` to the local file ``output`` with its plots beside it as
    ``<output stem>_<plot>``, each file atomically. It replaces an earlier copy of a card (and its plots),
    never another file: ``LoaderError`` naming it, before anything is written."""
    store, output = as_storage(directory), Path(output)
    refuse_copy_over(output, store)
    text = store.read_text(CARD_NAME)
    plots = {}
    for plot in (WORDS_PLOT, TOKENS_PLOT):
        if f"]({plot})" in text and store.exists(plot):
            copied = f"{output.stem}_{plot}"
            plots[copied] = store.read_bytes(plot)
            text = text.replace(f"]({plot})", f"]({copied})")
    for name, data in plots.items():
        with atomic_path(output.parent / name) as tmp:
            tmp.write_bytes(data)
    with atomic_path(output) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return output


def is_card(path: Path) -> bool:
    """Whether the local file ``path`` is a data card as ltsgen renders it (edited or not)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return text.startswith("---\n") and "\n## Collection process\n" in text and "\nGenerated by `" in text


def refuse_copy_over(output: Path, directory: str | Path | Storage | None = None) -> None:
    """Refuse a card copy to ``output`` where it would replace a file that is not an earlier copy: a
    file at ``output`` that is no card, or plots at its names beside a new ``output``; and, given the dataset
    ``directory``, its own card (a copy there would be taken for the user's edit of it, plots beside it)."""
    store = None if directory is None else as_storage(directory)
    try:
        same = (
            store is not None and store.is_local and output.resolve() == store.local_path(CARD_NAME).resolve()
        )
    except (OSError, RuntimeError) as error:  # a symlink loop, say
        raise LoaderError(f"{output}: cannot be written ({first_line(error)})") from None
    if same:
        raise LoaderError(
            f"{output}: is the card of {store} itself, which `ltsgen card` writes anyway; give --out another file"
        )
    if output.exists() and not (output.is_file() and is_card(output)):
        raise LoaderError(f"{output}: exists and is not a data card; ltsgen does not write over it")
    if not output.exists():
        for plot in (WORDS_PLOT, TOKENS_PLOT):
            beside = output.parent / f"{output.stem}_{plot}"
            if beside.exists():
                raise LoaderError(f"{beside}: exists beside no card copy; ltsgen does not write over it")


def check_statistics(manifest: Manifest, where: str) -> None:
    """``manifest.extra["statistics"]`` is an object of tables the card can render (see the module
    docstring); else ``LoaderError`` naming the field."""
    statistics = manifest.extra.get("statistics")
    if statistics is None:
        return
    if not isinstance(statistics, dict):
        raise LoaderError(
            f"{where}: extra.statistics must be an object of tables, not {type(statistics).__name__}"
        )
    for title, table in statistics.items():
        if isinstance(table, dict) and set(table) == {"columns", "rows"}:
            columns, rows = table["columns"], table["rows"]
            fits = isinstance(columns, list) and isinstance(rows, list)
            if not fits or not all(isinstance(row, list) and len(row) == len(columns) for row in rows):
                raise LoaderError(
                    f"{where}: extra.statistics.{title} must have a list of columns and rows that are lists of "
                    "that many cells"
                )


class _Lengths:
    """Per-record lengths read back from the shards."""

    def __init__(self) -> None:
        self.words: dict[str, list[int]] = defaultdict(list)  # split -> words per sample
        self.tokens: dict[str, list[int]] = defaultdict(list)  # bucket (or split) -> tokens per sample
        self.sources: dict[str, int] = defaultdict(int)
        self.bucket_sources: dict[tuple[str, str], list[int]] = defaultdict(
            list
        )  # (bucket, source) -> tokens


def _read_lengths(store: Storage, manifest: Manifest, verify: bool) -> _Lengths:
    from ltsgen.loaders.formats import decode_shard

    lengths = _Lengths()
    tokenized = manifest.tokenized
    columns = ["num_words", "source"] + (["num_tokens"] if tokenized else [])
    for split, shards in ordered_splits(manifest):
        for shard in shards:
            where, data = store.location(shard.path), store.read_bytes(shard.path)
            if verify:  # the card describes the shards the manifest lists, not others
                shard.check_bytes(data, where)
            shard_columns = decode_shard(data, manifest.format, where, columns)
            # an evaluation set is its split's (eval/1024 and eval_concat/1024 are two); a concatenated
            # window spans documents of every source: it is no document of one
            held_out = split in (EVAL_SPLIT, EVAL_CONCAT_SPLIT)
            label = f"{split}/{shard.bucket}" if held_out and shard.bucket else shard.bucket or "all"
            for record in shard_columns.records():
                lengths.words[split].append(record["num_words"])
                source = "-" if split == EVAL_CONCAT_SPLIT else record["source"]
                if split != EVAL_CONCAT_SPLIT:
                    lengths.sources[source] += 1
                if tokenized:
                    lengths.tokens[shard.bucket or split].append(record["num_tokens"])
                    lengths.bucket_sources[(label, source)].append(record["num_tokens"])
    return lengths


def _plots(manifest: Manifest, lengths: _Lengths) -> dict[str, bytes]:
    """The histograms as PNG bytes by file name, drawn on Agg figures of their own: pyplot (its state and
    slow import) is not needed."""
    Figure = require("matplotlib.figure", "build", "length histograms").Figure  # noqa: N806
    LogLocator = require("matplotlib.ticker", "build", "length histograms").LogLocator  # noqa: N806

    plots = {}
    for name, groups, unit in ((WORDS_PLOT, lengths.words, "words"), (TOKENS_PLOT, lengths.tokens, "tokens")):
        order = manifest.buckets if unit == "tokens" and manifest.buckets else sorted(groups)
        drawn = [group for group in order if groups.get(group)]  # no training bucket of a build all held out
        values = [v for group in drawn for v in groups[group] if v > 0]
        if not values:
            continue
        low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)) + 1e-9)
        bins = [10 ** (low + i * (high - low) / (8 * (high - low))) for i in range(8 * (high - low) + 1)]
        figure = Figure(figsize=(7, 3.5), dpi=100)
        axes = figure.subplots()
        for group in drawn:
            axes.hist(groups[group], bins=bins, histtype="step", linewidth=1.5, label=group)
        axes.set_xscale("log")
        axes.xaxis.set_major_formatter("{x:,.0f}")  # 1,000 rather than 10^3, which also needs mathtext
        axes.xaxis.set_minor_locator(LogLocator(subs=(2, 5)))  # 20 and 50 between 10 and 100 (not all 8)
        axes.set_xlabel(f"{unit} per sample (log scale)")
        axes.set_ylabel("samples")
        axes.set_title(f"{_card(manifest).get('pretty_name', manifest.source)}: {unit} per sample")
        axes.legend(title="bucket" if unit == "tokens" and manifest.buckets else "split", fontsize=8)
        figure.tight_layout()
        png = io.BytesIO()
        figure.savefig(png, format="png", metadata={"Software": None})
        plots[name] = png.getvalue()
    return plots


def ordered_splits(manifest: Manifest) -> list[tuple[str, list[ShardInfo]]]:
    """(split, shards) with train, validation and test first (the manifest's JSON keeps no order)."""
    rank = {split: number for number, split in enumerate(STANDARD_SPLITS)}
    return sorted(manifest.splits.items(), key=lambda item: (rank.get(item[0], 3), item[0]))


def _card(manifest: Manifest) -> dict[str, Any]:
    return dict(manifest.extra.get("card") or {})


def _size_category(samples: int) -> str:
    return next((label for limit, label in SIZE_CATEGORIES if samples < limit), "n>1B")


def _shards(manifest: Manifest) -> list[ShardInfo]:
    return [s for shards in manifest.splits.values() for s in shards]


def _features(manifest: Manifest) -> list[dict[str, Any]]:
    """The features as ``datasets.load_dataset`` produces them from these shards (YAML list form); ``meta``
    is a JSON string in every format."""
    import pyarrow as pa

    tokenized = manifest.tokenized
    ids_type = pa.list_(pa.from_numpy_dtype(_token_dtype(manifest))) if tokenized else None
    scalars = [("id", pa.string()), ("source", pa.string()), ("num_words", pa.int64())]
    scalars += [("num_tokens", pa.int64())] if tokenized else []
    if manifest.format == "parquet":
        fields = [scalars[0], ("text", pa.string()), *scalars[1:3], ("meta", pa.string())]
        fields += [("num_tokens", pa.int64()), ("input_ids", ids_type)] if tokenized else []
    elif manifest.format == "jsonl.zst":
        fields = sorted(
            scalars
            + [("text", pa.string()), ("meta", pa.string())]
            + ([("input_ids", pa.list_(pa.int64()))] if tokenized else [])
        )
    else:
        json_fields = sorted([*scalars, ("meta", pa.string())])
        fields = [("txt", pa.string()), ("json", pa.struct(json_fields))]
        fields += [("input_ids.npy", ids_type)] if tokenized else []
        fields += [("__key__", pa.string()), ("__url__", pa.string())]
    return [{"name": name, **yaml_feature(arrow_type)} for name, arrow_type in fields]


def yaml_feature(arrow_type) -> dict[str, Any]:
    """The Hugging Face card-YAML form of one arrow type, as ``datasets.Features`` writes it: ``dtype`` for
    a value, ``struct`` for the fields of a struct, ``list``/``large_list`` for lists (a bare dtype or field
    list when that is all the element holds)."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return {"struct": [{"name": field.name, **yaml_feature(field.type)} for field in arrow_type]}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = yaml_feature(arrow_type.value_type)
        simple = next(iter(element.values())) if list(element) in (["dtype"], ["struct"]) else element
        return {"large_list" if pa.types.is_large_list(arrow_type) else "list": simple}
    return {"dtype": _ARROW_DTYPES.get(str(arrow_type), str(arrow_type))}


_ARROW_DTYPES = {
    "double": "float64",
    "float": "float32",
    "halffloat": "float16",
}  # the rest keep arrow's name


def _token_dtype(manifest: Manifest) -> str:
    return token_dtype((manifest.tokenizer or {}).get("vocab_size") or 2**16)


def _data_files(manifest: Manifest, bucket: str | None) -> list[dict[str, str]]:
    ext = FORMATS[manifest.format]
    folder = bucket if bucket else ("*" if manifest.buckets else None)
    files = []
    for split, shards in ordered_splits(manifest):
        if shards and (bucket is None or any(s.bucket == bucket for s in shards)):
            top = shards[0].path.split("/")[0]  # the split's folder (earlier builds: eval-concat/)
            path = "/".join(part for part in (top, folder, f"shard-*.{ext}") if part)
            files.append({"split": split, "path": path})
    return files


def render_header(manifest: Manifest) -> dict[str, Any]:
    """The YAML metadata of the card, as a dict."""
    card = _card(manifest)
    samples = sum(s.samples for s in _shards(manifest))
    configs = [{"config_name": "default", "data_files": _data_files(manifest, None), "default": True}]
    for bucket in manifest.buckets or []:
        if any(s.bucket == bucket for s in _shards(manifest)):
            configs.append({"config_name": f"bucket-{bucket}", "data_files": _data_files(manifest, bucket)})
    # num_bytes: the shards' bytes on disk (datasets, which needs the field, counts decoded Arrow bytes when it
    # prepares a split itself: only decoding every shard would tell those)
    splits = [
        {
            "name": split,
            "num_bytes": sum(s.bytes for s in shards),
            "num_examples": sum(s.samples for s in shards),
        }
        for split, shards in ordered_splits(manifest)
        if shards
    ]
    size = sum(s.bytes for s in _shards(manifest))
    header: dict[str, Any] = {
        "license": card.get("license", "other"),
        "language": card.get("language", ["en"]),
        "multilinguality": "monolingual",
        "task_categories": card.get("task_categories", ["text-generation"]),
        "size_categories": [_size_category(samples)],
        "pretty_name": card.get("pretty_name", manifest.source),
        "annotations_creators": [card.get("annotations_creators", "machine-generated")],
        "language_creators": [card.get("language_creators", "machine-generated")],
        "source_datasets": card.get("source_datasets", ["original"]),
        "tags": card.get("tags", ["long-context"]),
        "configs": configs,
        "dataset_info": {
            "features": _features(manifest),
            "splits": splits,
            "download_size": size,
            "dataset_size": size,
        },
    }
    return header


def render_card(manifest: Manifest, lengths: _Lengths, plots: list[str]) -> str:
    """The full card text: YAML header, then the datasheet."""
    import yaml

    card = _card(manifest)
    header = yaml.safe_dump(render_header(manifest), sort_keys=False, allow_unicode=True, width=1000)
    name = card.get("pretty_name", manifest.source)
    out = [f"---\n{header}---\n", f"# {name}\n"]
    if card.get("summary"):
        out.append(card["summary"] + "\n")
    out.append("## Motivation\n")
    out.append(
        card.get("motivation", "Long-context language-model research: training and evaluation text.") + "\n"
    )
    out.append("## Composition\n")
    out.append(_composition(manifest, lengths, plots))
    for title, table in (manifest.extra.get("statistics") or {}).items():
        out.append(f"### {title}\n")
        out.append(_table(table))
    out.append("## Collection process\n")
    if card.get("collection"):
        out.append(card["collection"] + "\n")
    builder = manifest.builder
    out.append(
        f"Generated by `{builder.get('name')}` version `{builder.get('version')}`"
        f" (dataset format version {manifest.format_version}). Rebuilding with the same arguments gives "
        "byte-identical shards (their sha256 are in `manifest.json`).\n"
    )
    if card.get("command"):
        out.append(f"```\n{card['command']}\n```\n")
    out.append("Arguments:\n")
    out.append("```json\n" + json.dumps(builder.get("arguments", {}), indent=2, sort_keys=True) + "\n```\n")
    if manifest.tokenizer:
        tokenizer = manifest.tokenizer
        if manifest.tokenized:
            how = "Tokenized with"
        elif tokenizer.get("shards"):
            how = "Text stored untokenized, its token ids in `tokens/` (which the loaders read), by"
        else:
            how = "Text stored untokenized; the loaders tokenize it with"
        out.append(
            f"{how} `{tokenizer.get('path')}` (vocabulary {tokenizer.get('vocab_size')}, "
            f"end-of-text id {tokenizer.get('eos_id')}, sha256 `{tokenizer.get('sha256')}`).\n"
        )
    out.append("## Uses\n")
    out.append(card.get("uses", "Training and evaluating language models on long contexts.") + "\n")
    out.append(_reading(manifest))
    out.append("## Limitations\n")
    out.append(card.get("limitations", "See the collection process above.") + "\n")
    return "\n".join(out)


def _composition(manifest: Manifest, lengths: _Lengths, plots: list[str]) -> str:
    tokenized = manifest.tokenized
    rows = []
    for split, shards in ordered_splits(manifest):
        words = lengths.words.get(split, [])
        row = {
            "split": split,
            "samples": sum(s.samples for s in shards),
            "shards": len(shards),
            "words": sum(s.words for s in shards),
        }
        if tokenized:
            row["tokens"] = sum(s.tokens or 0 for s in shards)
        row["bytes"] = sum(s.bytes for s in shards)
        row.update(_spread(words, "words"))
        rows.append(row)
    text = [
        f"Format: `{manifest.format}` shards (`<split>/{'<bucket>/' if manifest.buckets else ''}"
        f"shard-NNNNN.{FORMATS[manifest.format]}`), indexed by `manifest.json`.\n",
        _table(rows),
    ]
    if len(lengths.sources) > 1:
        text.append(_table([{"source": k, "samples": v} for k, v in sorted(lengths.sources.items())]))
    if tokenized and lengths.bucket_sources:
        per_bucket = []
        # the training buckets in the manifest's order, then each evaluation set by split and length
        order = {b: i for i, b in enumerate(manifest.buckets or [])}

        def place(label: str) -> tuple:
            split, _, length = label.rpartition("/")
            return (order.get(label, len(order)), split, bucket_order(length), label)

        for (bucket, source), tokens in sorted(
            lengths.bucket_sources.items(), key=lambda kv: (place(kv[0][0]), kv[0][1])
        ):
            per_bucket.append(
                {"bucket": bucket, "source": source, "samples": len(tokens), "tokens": sum(tokens)}
            )
            per_bucket[-1].update(_spread(tokens, "tokens"))
        text.append("Token lengths per bucket and source:\n")
        text.append(_table(per_bucket))
    for plot in plots:
        text.append(f"![{plot.removesuffix('.png').replace('_', ' ')}]({plot})\n")
    return "\n".join(text)


def _spread(values: list[int], unit: str) -> dict[str, Any]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        f"min {unit}": ordered[0],
        f"median {unit}": statistics.median_low(ordered),
        f"mean {unit}": statistics.fmean(ordered),  # rounded once, where it is shown
        f"p90 {unit}": ordered[(9 * len(ordered) + 9) // 10 - 1],  # nearest rank, as ltsgen info
        f"max {unit}": ordered[-1],
    }


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (dict, list)):
        return "`" + json.dumps(value, sort_keys=True, ensure_ascii=False) + "`"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(table: Any) -> str:
    """A Markdown table from a dict of scalars, a dict of row dicts, or a list of row dicts."""
    if isinstance(table, dict) and set(table) == {"columns", "rows"}:
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]
    elif isinstance(table, dict) and table and all(isinstance(v, dict) for v in table.values()):
        rows = [{"": name, **row} for name, row in table.items()]
    elif isinstance(table, dict):
        rows = [{"name": name, "value": value} for name, value in table.items()]
    elif isinstance(table, list) and all(isinstance(row, dict) for row in table):
        rows = table
    else:
        return _cell(table) + "\n"
    if not rows:
        return "(none)\n"
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _reading(manifest: Manifest) -> str:
    ext = FORMATS[manifest.format]
    split = next((s for s, shards in ordered_splits(manifest) if shards), "train")
    pattern = f"{split}/{'*/' if manifest.buckets else ''}shard-*.{ext}"
    if manifest.format == "webdataset":
        example = (
            "```python\nimport glob, datasets, webdataset as wds\n"
            f'ds = wds.WebDataset(sorted(glob.glob("{pattern}")), shardshuffle=False)\n'
            '# each sample: {"__key__": id, "txt": text bytes, "json": fields and meta'
            + (', "input_ids.npy": token ids' if manifest.tokenized else "")
            + "}\n"
            f'hf = datasets.load_dataset("webdataset", data_files={{"{split}": "{pattern}"}})\n```\n'
        )
    elif manifest.format == "parquet":
        example = (
            "```python\nimport datasets, pyarrow.parquet as pq\n"
            f'hf = datasets.load_dataset("parquet", data_files={{"{split}": "{pattern}"}})\n'
            f'table = pq.read_table("{split}/{"<bucket>/" if manifest.buckets else ""}shard-00000.parquet")\n```\n'
        )
    else:
        example = (
            f"```sh\nzstd -dc {pattern} | jq -c '{{id, num_words}}'\n```\n"
            "```python\nimport datasets\n"
            f'hf = datasets.load_dataset("json", data_files={{"{split}": "{pattern}"}})\n```\n'
        )
    return (
        "Reading it (no ltsgen needed):\n\n"
        + example
        + "\nWith ltsgen: `ltsgen.loaders.StreamingDataset(DIR, split=...)` streams, shuffles, shards by rank "
        "and worker, resumes from a state dict and packs token ids for training.\n"
    )
