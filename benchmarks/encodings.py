"""Cost of each position encoding in the compact model, as a ratio to NoPE measured in the same run.

Step time: forward + backward of one training step per encoding and length, repeated with the encodings
interleaved (the order rotates every repeat) and summarised by the median. Memory: peak resident memory of
a separate process that evaluates one long sequence with no gradients, per encoding.

    python benchmarks/encodings.py                 # lengths 128 512 2048, memory at 8192
    python benchmarks/encodings.py --quick         # a few minutes on one thread
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

GOALS = {"rope": 1.1, "rope_pi": 1.1, "yarn": 1.1, "fire": 1.4}
BIAS_GOAL = 1.3
GOAL_LENGTH = 512


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048], help="training lengths")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens per step (batch = tokens // length)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per encoding and length")
    parser.add_argument("--encodings", nargs="+", default=None, help="subset of encodings (NoPE always runs)")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=4)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument(
        "--memory-length", type=int, default=8192, help="evaluation length for peak memory (0: skip)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default=None,
        help="process CPU time (default on CPU: robust on a shared machine) or wall time (default on CUDA)",
    )
    parser.add_argument(
        "--flush-denormal",
        action="store_true",
        help="torch.set_flush_denormal(True), as a CPU training script should (large negative biases make denormals)",
    )
    parser.add_argument("--quick", action="store_true", help="lengths 128 512, 4096 tokens, 3 repeats")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.lengths, args.tokens, args.repeats = [128, 512], 4096, 3
    return args


def make_model(name: str, args: argparse.Namespace, device: str):
    import torch

    from ltsgen.training import ModelConfig, TransformerLM

    torch.manual_seed(0)
    config = ModelConfig(args.vocab_size, args.d_model, args.n_layers, args.n_heads, encoding=name)
    return TransformerLM(config).to(device)


def step_times(names: list[str], args: argparse.Namespace, device: str) -> dict[int, dict[str, float]]:
    import torch

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    results: dict[int, dict[str, float]] = {}
    for length in args.lengths:
        batch = max(1, args.tokens // length)
        data = torch.randint(0, args.vocab_size, (batch, length + 1), device=device)
        inputs, targets = data[:, :-1], data[:, 1:]
        models = {name: make_model(name, args, device) for name in names}
        samples: dict[str, list[float]] = {name: [] for name in names}
        for repeat in range(args.repeats + 1):  # the first round warms up
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                model = models[name]
                model.zero_grad(set_to_none=True)
                sync()
                start = clock()
                _, loss = model(inputs, targets)
                loss.backward()
                sync()
                if repeat:
                    samples[name].append(clock() - start)
        results[length] = {name: statistics.median(times) for name, times in samples.items()}
        print(
            f"  length {length:5d}  batch {batch:3d}  NoPE step {results[length]['nope'] * 1e3:8.1f} ms",
            flush=True,
        )
    return results


def peak_memory(name: str, args: argparse.Namespace) -> float:
    """Peak RSS (MiB) of a fresh process that evaluates ``args.memory_length`` tokens with encoding ``name``."""
    command = [sys.executable, __file__, "--memory-child", name, "--memory-length", str(args.memory_length),
               "--d-model", str(args.d_model), "--n-layers", str(args.n_layers), "--n-heads", str(args.n_heads),
               "--vocab-size", str(args.vocab_size), "--threads", str(args.threads), "--device", "cpu",
               *(["--flush-denormal"] if args.flush_denormal else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory run of {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mib"]


def memory_child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(args.flush_denormal)
    model = make_model(args.memory_child, args, "cpu").eval()
    tokens = torch.randint(0, args.vocab_size, (1, args.memory_length))
    start = time.perf_counter()
    with torch.no_grad():
        logits = model(tokens)
    assert torch.isfinite(logits).all()
    seconds = time.perf_counter() - start
    print(json.dumps({"peak_rss_mib": peak_rss_mib(), "seconds": seconds}))


def peak_rss_mib() -> float:
    """This process's peak resident memory. VmHWM belongs to this program alone (ru_maxrss can carry the
    parent's peak across fork and exec on Linux); ru_maxrss is the fallback where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def goal(name: str) -> float | None:
    if name in GOALS:
        return GOALS[name]
    return None if name == "nope" else BIAS_GOAL


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if args.memory_child:
        memory_child(args)
        return 0
    import torch

    from ltsgen.encodings import NAMES, EncodingError, canonical_name

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(args.flush_denormal)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.clock = args.clock or ("wall" if device == "cuda" else "cpu")
    try:  # a misspelt name: one line
        named = [canonical_name(name) for name in args.encodings or NAMES]
    except EncodingError as error:
        raise SystemExit(f"encodings.py: error: {error}") from None
    names = ["nope", *[n for n in named if n != "nope"]]
    print(f"device {device}, {torch.get_num_threads()} thread(s), torch {torch.__version__}; model d_model "
          f"{args.d_model}, {args.n_layers} layers, {args.n_heads} heads, vocab {args.vocab_size}; "
          f"{args.tokens} tokens per step, median {args.clock} time of {args.repeats}; "
          f"flush denormals {args.flush_denormal}")  # fmt: skip
    times = step_times(names, args, device)
    memory = {}
    if args.memory_length:
        print(
            f"peak memory of a {args.memory_length}-token evaluation (separate process per encoding)",
            flush=True,
        )
        memory = {name: peak_memory(name, args) for name in names}

    header = "| encoding | " + " | ".join(f"step x NoPE @{n}" for n in args.lengths)
    header += f" | goal @{GOAL_LENGTH} |" + (f" peak RSS @{args.memory_length} (MiB) |" if memory else "")
    print()
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for name in names:
        ratios = [times[n][name] / times[n]["nope"] for n in args.lengths]
        target = goal(name)
        verdict = "-"
        if target is not None and GOAL_LENGTH in times:
            met = times[GOAL_LENGTH][name] / times[GOAL_LENGTH]["nope"] <= target
            verdict = f"<= {target} {'met' if met else 'MISSED'}"
        row = f"| {name} | " + " | ".join(f"{r:.2f}" for r in ratios) + f" | {verdict} |"
        if memory:
            row += f" {memory[name]:.0f} |"
        print(row)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"device": device, "args": vars(args), "step_seconds": times, "peak_rss_mib": memory}, handle
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
