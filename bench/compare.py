"""This checkout against another revision, in one interleaved run.

    python -m bench --compare REV [--pairs 5] [--n 10000] [--latency-count 200]

Checks REV out in a temporary git worktree, then runs the quick figures (enqueue single
and bulk, no-op jobs/s with 1 and 2 worker processes, enqueue->start latency p50/p99;
``python -m bench --skip ceiling,big``) for this checkout and for REV in turn, ``--pairs``
times, alternating which goes first. Each run starts its own private redis-server. Prints,
per figure, both medians and the median of the pair-by-pair ratios (this / REV; for a
latency, REV / this, so that above 1 is better on every line), with the lowest and
highest pair. Only the ratios of one such run should back a performance claim: on a
shared host the absolute figures move from run to run, the pairs much less.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

Getter = Callable[[dict[str, Any]], float | None]


def _process(headline: str) -> Getter:
    def get(out: dict[str, Any]) -> float | None:
        for res in out.get("process", []):
            if res.get("headline") == headline:
                return res.get("rate_steady") or res.get("rate")
        return None

    return get


#: (label, read the figure from a run's latest.json, higher is better)
FIGURES: list[tuple[str, Getter, bool]] = [
    ("enqueue, one call per job (jobs/s)", lambda o: o["enqueue"]["single_per_s"], True),
    ("enqueue_many by 1000 (jobs/s)", lambda o: o["enqueue"]["bulk_per_s"], True),
    ("no-op jobs/s, 1 worker process", _process("1w"), True),
    ("no-op jobs/s, 2 worker processes", _process("2w"), True),
    ("latency p50 (ms)", lambda o: o["latency"]["p50_ms"], False),
    ("latency p99 (ms)", lambda o: o["latency"]["p99_ms"], False),
]


def _run(tree: Path, out: Path, n: int, latency_count: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench", "--n", str(n), "--skip", "ceiling,big"]
    cmd += ["--latency-count", str(latency_count), "--out", str(out)]
    subprocess.run(cmd, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads((out / "latest.json").read_text())
    return result


def _figure(get: Getter, out: dict[str, Any]) -> float | None:
    try:
        value = get(out)
    except (KeyError, TypeError):
        return None
    return float(value) if value else None


def table(this: list[dict[str, Any]], other: list[dict[str, Any]], rev: str) -> str:
    """The comparison table of paired runs (``this[i]`` and ``other[i]`` are pair i)."""
    lines = [
        f"| figure | this checkout (median) | {rev} (median) | ratio, median of pairs | "
        "lowest .. highest pair |",
        "|---|---:|---:|---:|---|",
    ]
    for label, get, higher in FIGURES:
        mine = [_figure(get, o) for o in this]
        theirs = [_figure(get, o) for o in other]
        pairs = [(a, b) for a, b in zip(mine, theirs, strict=True) if a and b]
        if not pairs:
            lines.append(f"| {label} | — | — | — | no pair measured it |")
            continue
        ratios = sorted((a / b) if higher else (b / a) for a, b in pairs)
        lines.append(
            f"| {label} | {statistics.median(a for a, _ in pairs):,.2f} | "
            f"{statistics.median(b for _, b in pairs):,.2f} | "
            f"{statistics.median(ratios):.2f}x | {ratios[0]:.2f} .. {ratios[-1]:.2f} |"
        )
    lines.append("")
    lines.append(
        f"{len(this)} pairs, alternating order; ratio > 1: this checkout is better "
        "(for latency: lower)."
    )
    return "\n".join(lines)


def main(rev: str, pairs: int, n: int, latency_count: int) -> int:
    if pairs < 1 or pairs > 20:
        print("--pairs must be 1..20", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="zq-compare-"))
    other = work / "rev"
    try:
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), rev], cwd=ROOT, check=True
        )
        label = subprocess.run(
            ["git", "rev-parse", "--short", rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        mine: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for i in range(pairs):
            order = [("this", ROOT, mine), (label, other, theirs)]
            if i % 2:
                order.reverse()
            for name, tree, into in order:
                print(f"pair {i + 1}/{pairs}: {name}", file=sys.stderr, flush=True)
                into.append(_run(tree, work / f"{name}-{i}", n, latency_count))
        print(table(mine, theirs, label))
        return 0
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
        shutil.rmtree(work, ignore_errors=True)
