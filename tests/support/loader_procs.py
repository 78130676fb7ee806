"""Real processes for the loader tests, each run in a child forked from the test process
(``process_tools.forked``), where torch is loaded: the ranks of a gloo job, a training loop that can be
killed, and a reader of the node cache.

``world(OUT, JOBS)`` needs WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and forks ranks 1 and up itself. JOBS is
{NAME: {"source": DIR or {"DIR": proportion, ...}, "workers": [counts], "resume": STATE or null}} (or
{NAME: {"source": DIR, "eval_length": L}}: its evaluation set); ``world`` writes OUT/NAME-rank{R}.json, and
OUT/NAME-state.json at 2 ranks.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from ltsgen.loaders import StreamingDataset, load_eval_set

GLOBAL_BATCH = 6
SEED = 13
ELASTIC_STOP = 5  # the 2-rank run saves its state after this many steps


def lockstep(loader) -> list[list[str]]:
    """Iterate like DDP training: every step all-reduces, so unequal batch counts would hang (and time out)."""
    batches = []
    for batch in loader:
        batches.append(list(batch["id"]))
        dist.all_reduce(torch.ones(1))
    return batches


def ranks(out: str, jobs: dict[str, dict]) -> None:
    """Run every job on the ranks of one gloo group: its worker counts in lockstep, at 2 ranks an interrupted
    run whose loader state rank 0 saves, and with ``resume`` the rest of such a run on this world size."""
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for name, job in jobs.items():
        results: dict[str, object] = {}
        if "eval_length" in job:  # an evaluation set: the first token of each sequence this rank reads
            results["eval_set"] = load_eval_set(job["source"], job["eval_length"])[:, 0].tolist()
            Path(out, f"{name}-rank{rank}.json").write_text(json.dumps(results))
            continue

        def dataset(source=job["source"]) -> StreamingDataset:
            return StreamingDataset(source, seed=SEED, batch_size=GLOBAL_BATCH // world)

        for workers in job["workers"]:
            results[str(workers)] = lockstep(dataset().loader(num_workers=workers))
        if world == 2:  # interrupt a 2-rank run; rank 0 keeps the loader state
            loader = dataset().loader(num_workers=1)
            head = []
            for batch in loader:
                head.append(list(batch["id"]))
                dist.all_reduce(torch.ones(1))
                if len(head) == ELASTIC_STOP:
                    break
            results["elastic_head"] = head
            if rank == 0:
                Path(out, f"{name}-state.json").write_text(json.dumps(loader.state_dict()))
        if job.get("resume"):  # continue that run on this world size
            resumed = dataset()
            resumed.load_state_dict(json.loads(Path(job["resume"]).read_text()))
            results["elastic_tail"] = lockstep(resumed.loader(num_workers=2))
        Path(out, f"{name}-rank{rank}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


def world(out: str, jobs: dict[str, dict]) -> None:
    """Every rank of one gloo group (``ranks``): this process is rank 0 and forks ranks 1 and up, so that the group
    imports torch once. A failed rank makes this process exit 1; a failure here kills the forked ranks, which
    would wait on it."""
    forked = []
    for rank in range(1, int(os.environ["WORLD_SIZE"])):
        pid = os.fork()
        if pid == 0:
            os.environ["RANK"] = str(rank)
            code = 0
            try:
                ranks(out, jobs)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        forked.append(pid)
    os.environ["RANK"] = "0"
    try:
        ranks(out, jobs)
    except BaseException:
        for pid in forked:
            os.kill(pid, signal.SIGKILL)
        raise
    if any(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0 for pid in forked):
        sys.exit(1)


def train(directory: str, checkpoint: str, workers: int) -> None:
    """Consume batches, checkpointing (batches so far + loader state) atomically after every step."""
    path = Path(checkpoint)
    saved = json.loads(path.read_text()) if path.exists() else {"batches": [], "state": None}
    dataset = StreamingDataset(directory, seed=SEED, batch_size=GLOBAL_BATCH)
    if saved["state"] is not None:
        dataset.load_state_dict(saved["state"])
    loader = dataset.loader(num_workers=workers)
    for batch in loader:
        saved["batches"].append(list(batch["id"]))
        saved["state"] = loader.state_dict()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(saved))
        os.replace(tmp, path)
        time.sleep(0.03)
    Path(checkpoint + ".done").touch()


def cached(url: str, cache_dir: str, out: str) -> None:
    """Read every record of ``url`` in stored order through the node cache, starting on a signal."""
    dataset = StreamingDataset(url, shuffle=False, columns=["id"], cache_dir=cache_dir)
    Path(out, "ready").touch()
    while not Path(out, "go").exists():
        time.sleep(0.01)
    ids = [record["id"] for record in dataset]
    Path(out, "ids.json").write_text(json.dumps(ids))
