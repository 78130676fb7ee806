"""Process-group set-up for ``torchrun``: NCCL on GPUs, gloo on CPU; a single process otherwise."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
import torch.distributed as dist

from ltsgen.training.errors import TrainingError
from ltsgen.training.rundir import file_error

T = TypeVar("T")


@dataclass(frozen=True)
class Placement:
    """Where this process runs: its rank among ``world_size`` processes and its device."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise TrainingError(f"--device {name!r}: not a device (auto, cpu, cuda, cuda:1, ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TrainingError(
            f"--device {name!r}: CUDA is not available here (torch {torch.__version__}); use --device cpu"
        )
    # meta, mps, xpu, ...: torch names them, the loop does not run there
    if device.type not in ("cpu", "cuda"):
        raise TrainingError(f"--device {name!r}: ltsgen trains and evaluates on cpu or cuda (auto picks)")
    return device


def setup(device: str = "auto") -> Placement:
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1), else run alone.

    ``torch.distributed.nn.functional`` (which DDP imports) takes the default group as a default argument
    of its functions when it is imported: imported after ``init_process_group`` it would keep the group,
    and gloo's worker threads, alive past ``teardown`` into the interpreter's exit, where a worker that
    still holds a finished collective's tensors aborts the process ("terminate called without an active
    exception"). It is imported here first.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Placement(0, 1, resolve_device(device))
    resolved = resolve_device(device)
    if resolved.type == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        resolved = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        importlib.import_module("torch.distributed.nn.functional")  # before the group exists: see above
        dist.init_process_group(backend="nccl" if resolved.type == "cuda" else "gloo")
    return Placement(dist.get_rank(), dist.get_world_size(), resolved)


def teardown(placement: Placement) -> None:
    """Leave the process group (with the DDP model gone, this ends gloo's worker threads)."""
    if placement.distributed and dist.is_initialized():
        dist.destroy_process_group()


def main_first(placement: Placement | None, work: Callable[[], T], folder: Path) -> T | None:
    """Run ``work`` on the main rank (alone: here), then let every rank go on together; returns its result
    there, None on the other ranks.

    An error of ``work`` is raised on every rank: the main rank's own, the others a ``TrainingError`` with
    its message (an ``OSError`` worded as ``train`` words it, by its file, else by ``folder``, the run's).
    A barrier alone would leave them waiting for a rank that has left, to die with a long traceback of the
    process group's ("Connection closed by peer").
    """
    if placement is None or not placement.distributed:
        return work()
    result, failure = None, None
    if placement.is_main:
        try:
            result = work()
        except OSError as error:  # worded as train() words it alone, so that every rank says the same
            failure = file_error(error, folder)
            failure.__suppress_context__ = True
        except BaseException as error:  # said to the other ranks, then raised here
            failure = error
    said = [None if failure is None else (str(failure) or type(failure).__name__)]
    dist.broadcast_object_list(said, src=0)
    if failure is not None:
        raise failure
    if said[0] is not None:
        raise TrainingError(said[0])
    return result


def mean_across_ranks(value: torch.Tensor, placement: Placement) -> torch.Tensor:
    """The mean of a scalar tensor over all ranks (the value itself when running alone)."""
    if not placement.distributed:
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / placement.world_size
