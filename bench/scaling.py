"""Scaling across Redis Cluster masters: no-op jobs/s on 6 queues, 1 master vs 3 masters.

    python -m bench.scaling [--jobs 36000] [--rounds 4] [--prefetch 20] [--out FILE]

Starts its own servers (tests/topology.py: redis-server and redis-cli must be on PATH):
a one-master cluster (all 16384 slots on one node) and a three-master cluster (no
replicas, so replication costs nothing in either), and stops them at the end. In each
scenario, 6 queues are filled with ``--jobs`` no-op jobs in all (an equal share each;
on three masters the queue names are picked so that each master holds two queues), then
2 ``zqueue_worker --burst`` processes drain them, each serving all 6 queues with equal
weights. Reported per round: jobs/s (jobs / wall time from the workers' start to the
last exit), the CPU seconds used by the two workers (from ``wait4``) and by each
redis-server (from /proc), and the machine's busy share over the drain (from
/proc/stat: it includes everything else running, e.g. other test runs).

On a machine with N cores, 2 worker processes plus k busy redis-servers compete for
those N cores: more masters can only help while Redis, not the workers or the cores,
is the bottleneck. Read the CPU columns before the jobs/s.

A third scenario, ``partitioned``, drains the same jobs from ONE queue with
``partitions: 6`` on a three-master cluster (the prefix picked so that each master holds
two partitions), against the 6 plain queues of ``3-masters``.

Rounds of the scenarios are interleaved, so that each meets about the same load from
whatever else runs. Adding a scenario: a ``Scenario`` subclass (start, round, stop)
listed in ``SCENARIOS``.

Every wait is bounded (``--timeout`` per drain); only this run's servers are touched.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.scaling_settings"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from django_zqueue import conf, get_queue  # noqa: E402
from testproject.demo import tasks  # noqa: E402
from tests import topology  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def log(*a: Any) -> None:
    print("[scaling]", *a, file=sys.stderr, flush=True)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def pick_queues(cluster: topology.Cluster, prefix: str, per_master: int) -> list[str]:
    """Six queue names: ``per_master`` on each master (bounded search)."""
    client = cluster.client()
    masters = {n.name for n in client.get_primaries()}
    chosen: dict[str, list[str]] = {m: [] for m in masters}
    for i in range(2000):
        name = f"s{i}"
        node = client.get_node_from_key(f"{{{prefix}:{name}}}:ready").name
        if len(chosen[node]) < per_master:
            chosen[node].append(name)
        if sum(len(v) for v in chosen.values()) == 6:
            client.close()
            return [n for names in chosen.values() for n in names]
    raise RuntimeError("could not place 6 queues evenly")


def drain(
    cluster: topology.Cluster,
    prefix: str,
    names: list[str],
    args: argparse.Namespace,
    partitions: int = 1,
) -> dict[str, Any]:
    options = {"partitions": partitions} if partitions > 1 else {}
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": cluster.url,
        "PREFIX": prefix,
        "QUEUES": {"default": {}, **dict.fromkeys(names, options)},
    }
    with override_settings(ZQUEUE=value):
        try:
            share = args.jobs // len(names)
            for name in names:
                task = tasks.noop.using(queue=name, on_commit=False)
                for i in range(0, share, 1000):
                    task.enqueue_many([()] * min(1000, share - i))
            total = share * len(names)
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "DJANGO_SETTINGS_MODULE": "bench.scaling_settings",
                "ZQBENCH_QUEUES": ",".join(names),
                "ZQBENCH_PARTITIONS": str(partitions),
                "ZQUEUE_REDIS_URL": cluster.url,
                "ZQUEUE_PREFIX": prefix,
            }
            cmd = [
                sys.executable,
                str(ROOT / "testproject/manage.py"),
                "zqueue_worker",
                "-v",
                "0",
                "--burst",
                "--no-scanner",
                "--prefetch",
                str(args.prefetch),
                "--queues",
                ",".join(f"{n}:1" for n in names),
            ]
            servers = {p: proc.pid for p, proc in cluster.servers.procs.items()}
            redis_before = {p: proc_cpu_seconds(pid) for p, pid in servers.items()}
            busy0, total0 = machine_ticks()
            t0 = time.perf_counter()
            workers = [
                subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for _ in range(2)
            ]
            worker_cpu = 0.0
            deadline = time.monotonic() + args.timeout
            for w in workers:
                while True:  # bounded by --timeout
                    pid, status, usage = os.wait4(w.pid, os.WNOHANG)
                    if pid:
                        w.returncode = os.waitstatus_to_exitcode(status)
                        worker_cpu += usage.ru_utime + usage.ru_stime
                        break
                    if time.monotonic() > deadline:
                        for x in workers:
                            x.kill()
                        raise RuntimeError(f"drain took longer than {args.timeout} s")
                    time.sleep(0.01)
            elapsed = time.perf_counter() - t0
            busy1, total1 = machine_ticks()
            redis_cpu = {p: proc_cpu_seconds(pid) - redis_before[p] for p, pid in servers.items()}
            for w in workers:
                if w.returncode != 0:
                    err = w.stderr.read().decode() if w.stderr else ""
                    raise RuntimeError(f"worker exited {w.returncode}: {err[-2000:]}")
            acked = sum(get_queue(n).stats().get("acked", 0) for n in names)
            left = sum(get_queue(n).counts()["ready"] for n in names)
            if acked != total or left:
                raise RuntimeError(f"acked {acked} of {total}, {left} left")
            for n in names:
                get_queue(n).clear()
        finally:
            conf.reset()
    return {
        "jobs": total,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(total / elapsed),
        "worker_cpu_s": round(worker_cpu, 2),
        "redis_cpu_s": [round(redis_cpu[p], 2) for p in sorted(redis_cpu)],
        "machine_busy": round((busy1 - busy0) / max(1, total1 - total0), 3),
    }


class Scenario(ABC):
    """Servers started once; ``round()`` drains once and returns the figures."""

    name = ""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def round(self, args: argparse.Namespace) -> dict[str, Any]: ...

    @abstractmethod
    def stop(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        return {"scenario": self.name}


class Masters(Scenario):
    """6 queues on a cluster of ``masters`` masters (no replicas)."""

    def __init__(self, masters: int) -> None:
        self.masters = masters
        self.name = f"{masters}-master" + ("s" if masters > 1 else "")
        self.cluster: topology.Cluster | None = None
        self.prefix = f"zqscale-{uuid.uuid4().hex[:8]}"  # with the names: the placement
        self.names: list[str] = []

    def start(self) -> None:
        log(f"starting a {self.masters}-master cluster")
        self.cluster = topology.start_cluster(masters=self.masters, replicas=0)
        self.names = pick_queues(self.cluster, self.prefix, 6 // self.masters)

    def round(self, args: argparse.Namespace) -> dict[str, Any]:
        assert self.cluster is not None
        return drain(self.cluster, self.prefix, self.names, args)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    def describe(self) -> dict[str, Any]:
        return {"scenario": self.name, "masters": self.masters, "queues": self.names}


class Partitioned(Scenario):
    """One queue with 6 partitions on a 3-master cluster, two partitions per master."""

    name = "3-masters-1-queue-6-partitions"

    def __init__(self) -> None:
        self.cluster: topology.Cluster | None = None
        self.prefix = ""

    def start(self) -> None:
        log("starting a 3-master cluster")
        self.cluster = topology.start_cluster(masters=3, replicas=0)
        client = self.cluster.client()
        try:
            for _ in range(2000):  # bounded: a prefix that puts 2 partitions on each master
                prefix = f"zqscale-{uuid.uuid4().hex[:8]}"
                nodes = [
                    client.get_node_from_key(f"{{{prefix}:p#{i}}}:ready").name for i in range(6)
                ]
                if all(nodes.count(n) == 2 for n in set(nodes)) and len(set(nodes)) == 3:
                    self.prefix = prefix
                    return
        finally:
            client.close()
        raise RuntimeError("no prefix puts two partitions on each master")

    def round(self, args: argparse.Namespace) -> dict[str, Any]:
        assert self.cluster is not None
        return drain(self.cluster, self.prefix, ["p"], args, partitions=6)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    def describe(self) -> dict[str, Any]:
        return {"scenario": self.name, "masters": 3, "queues": ["p"], "partitions": 6}


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "1-master": lambda: Masters(1),
    "3-masters": lambda: Masters(3),
    "partitioned": Partitioned,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=36000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--prefetch", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    if not topology.available():
        sys.exit("bench.scaling needs redis-server and redis-cli on PATH")
    scenarios = [SCENARIOS[name]() for name in args.scenario or list(SCENARIOS)]
    rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in scenarios}
    try:
        for s in scenarios:
            s.start()
        # rounds interleaved (and the order reversed every other round), so that the
        # scenarios share the machine's other load as evenly as possible
        for r in range(args.rounds):
            for s in scenarios if r % 2 == 0 else scenarios[::-1]:
                result = s.round(args)
                log(f"{s.name}, round {r + 1}: {result}")
                rounds[s.name].append(result)
    finally:
        for s in scenarios:
            s.stop()
    results = {
        "cores": os.cpu_count(),
        "jobs": args.jobs,
        "prefetch": args.prefetch,
        "scenarios": [
            {
                **s.describe(),
                "rounds": rounds[s.name],
                "median_jobs_per_s": round(
                    statistics.median(x["jobs_per_s"] for x in rounds[s.name])
                ),
            }
            for s in scenarios
        ],
    }
    text = json.dumps(results, indent=2)
    print(text)
    print()
    print("| scenario | jobs/s (median) | per round: jobs/s, worker CPU s, redis CPU s, busy |")
    print("|---|---|---|")
    for s in results["scenarios"]:
        rounds = "; ".join(
            f"{r['jobs_per_s']}, {r['worker_cpu_s']}, {'+'.join(map(str, r['redis_cpu_s']))}, "
            f"{r['machine_busy']:.0%}"
            for r in s["rounds"]
        )
        print(f"| {s['scenario']} | {s['median_jobs_per_s']} | {rounds} |")
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
