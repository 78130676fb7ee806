"""Row groups decoded once for all of a loader's workers: each is checked and decoded by the process that
claims it and read by the others; a failed claim leaves the row group to the next process that needs it."""

from __future__ import annotations

import numpy as np
import pytest

from ltsgen.loaders.contract import ContractError
from ltsgen.loaders.indexed import IndexedParquet, ShardBytes
from ltsgen.loaders.shared import SharedDecodes, remove_folder, shared_folder
from ltsgen.shards import ShardWriter

ROWS = 300  # three row groups of at most 128 records


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shared")
    rng = np.random.default_rng(3)
    ids = [rng.integers(1, 5000, int(n), dtype=np.uint16) for n in rng.integers(1, 60, ROWS)]
    with ShardWriter(directory, "train/shard-00000.parquet", "parquet", "uint16") as writer:
        for number, row in enumerate(ids):
            writer.write({"id": f"d{number}", "text": "", "source": "test", "input_ids": row})
    return directory / "train" / "shard-00000.parquet", writer.info.footer_sha256, ids


def _column(shard, decodes: SharedDecodes, checked: list[int], corrupt: int | None = None):
    """The shard's ids as one worker opens them, recording each row group it checks (and decodes)."""
    path, footer, _ = shard
    indexed = IndexedParquet(ShardBytes(str(path), path=path), footer)

    def check(group: int) -> None:
        checked.append(group)
        if group == corrupt:
            raise ContractError(f"{path}: row group {group}: sha256 does not match")
        indexed._check(group)

    column = indexed.tokens(lambda groups, size, dtype: decodes.region(0, groups, size, dtype))
    column._check = check
    return column


def test_each_row_group_is_decoded_once_for_all_workers(shard):
    folder = shared_folder()
    try:
        first, second = [], []
        ours = _column(shard, SharedDecodes(folder, 0, 2), first)
        theirs = _column(shard, SharedDecodes(folder, 1, 2), second)
        ours.decode_groups(SharedDecodes(folder, 0, 2).owned(3))  # worker 0 decodes groups 0 and 2 ahead
        theirs.load_all()  # worker 1 needs every record: it decodes group 1 only, and reads the others
        assert (sorted(first), second) == ([0, 2], [1])
        for column in (theirs, ours):
            column.load_all()
            assert column.complete
            assert [column[i].tolist() for i in range(ROWS)] == [row.tolist() for row in shard[2]]
        assert (sorted(first), second) == ([0, 2], [1])  # nothing was decoded twice
    finally:
        remove_folder(folder)


def test_a_failed_row_group_is_decoded_again_by_the_next_worker_and_fails_there(shard):
    folder = shared_folder()
    try:
        first, second = [], []
        ours = _column(shard, SharedDecodes(folder, 0, 2), first, corrupt=1)
        with pytest.raises(ContractError, match="row group 1: sha256 does not match"):
            ours.load(np.asarray([200]))  # row 200 lives in group 1
        theirs = _column(shard, SharedDecodes(folder, 1, 2), second, corrupt=1)
        with pytest.raises(ContractError, match="row group 1: sha256 does not match"):
            theirs.load(np.asarray([200]))  # not read from a region that holds no checked ids
        assert (first, second) == ([1], [1])
    finally:
        remove_folder(folder)


def test_without_its_folder_a_worker_decodes_on_its_own(shard):
    folder = shared_folder()
    remove_folder(folder)  # the loader's pass ended
    checked = []
    column = _column(shard, SharedDecodes(folder, 0, 2), checked)
    column.load_all()
    assert sorted(checked) == [0, 1, 2]
    assert [column[i].tolist() for i in range(ROWS)] == [row.tolist() for row in shard[2]]
