"""``ltsgen.loaders``: read any ltsgen dataset directory (local or URL) as a stream for PyTorch.

Public names:

- ``StreamingDataset(path_or_url, split="train", *, bucket=None, shuffle=True, seed=0, epoch=0, rank=None,
  world_size=None, columns=None, transform=None, batch_size=None, remainder="drop", shuffle_window=4,
  seq_len=None, position_ids=False, tokenizer=None, eos_id=None, by_bucket=False, verify=True,
  on_error="raise", allow_pipe=False, storage_options=None, cache_dir=None, cache_limit=None,
  max_doc_chars=1_000_000, token_counts=None)``: an
  ``IterableDataset`` of this rank's records (dicts), or of packed
  blocks ``{"input_ids": LongTensor[seq_len + 1]}`` when ``seq_len`` is set. ``loader(num_workers)`` gives a
  ``StreamingLoader`` (a torch DataLoader) of whole batches (``{"input_ids": LongTensor[batch_size, seq_len + 1]}``)
  in the same order for any worker count; ``state_dict()`` / ``load_state_dict()`` on either (also from any
  rank's state, for elastic resume);
  ``set_epoch(epoch)``; ``len()`` is the exact number of items per rank and epoch.
- ``StreamingDataset({path_or_url: proportion, ...}, ...)``: a ``StreamingMixture``, the datasets mixed item by
  item in those proportions (each source reshuffled at its own epochs), with every option above but
  ``by_bucket``; ``parse_mixture(text)`` reads the CLI's ``PATH=WEIGHT,PATH=WEIGHT`` form.
- ``dataset_state(state)``: the global position inside a dataset, loader or torchdata ``StatefulDataLoader`` state.
- ``collate_records``, ``PadCollate(pad_id)``: collate functions for whole records and length buckets.
- ``load_eval_set(path_or_url, length)``: an exact-length evaluation set as LongTensor [n, length].
- ``read_shard(path_or_url, fmt, columns=None)``: the records of one shard in stored order.
- ``LoaderError``: every problem of the loaders, as one line naming the file or field: a dataset or shard
  that breaks the contract, a state that is malformed or does not fit the dataset it is loaded into, a file
  or cache folder that cannot be read or written (``storage.StorageError``, its one subclass).

Modules: ``errors`` (``LoaderError``), ``files`` (atomic local writes and checksums), ``contract`` (the
dataset-directory contract), ``storage`` (paths and URLs as filesystems), ``sources`` (bytes from paths, URLs and ``pipe:``), ``cache``
(the node-local shard cache), ``formats`` (shard decoders), ``reader`` (shards decoded in threads, the next
window prefetched), ``order`` (the stateless epoch order), ``packing``, ``buckets``, ``state`` (a loader
state checked field by field), ``mixture`` (weights, schedule, the mixture's items from its sources),
``loader`` (``StreamingLoader``), ``dataset`` (``StreamingDataset`` and ``StreamingMixture``, above both).

Submodules load on first use, so importing ``ltsgen.loaders.contract`` (as the builders do) stays light.
"""

from importlib import import_module

_HOMES = {
    "LoaderError": "errors",
    "PadCollate": "buckets",
    "StreamingDataset": "dataset",
    "StreamingLoader": "loader",
    "StreamingMixture": "dataset",
    "collate_records": "loader",
    "dataset_state": "state",
    "load_eval_set": "buckets",
    "parse_mixture": "mixture",
    "read_shard": "formats",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOMES[name]}", __name__), name)
