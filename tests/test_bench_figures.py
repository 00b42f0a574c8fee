"""The benchmark's own arithmetic: what it reads from Redis and how it judges a target.

A benchmark that reads the wrong counter prints 0 and looks like a result, so these
check the readings against calls made here, and the target rows against figures whose
verdict is known."""

from __future__ import annotations

from typing import Any

import redis

from bench import _report
from bench._redis import commandstats, script_usec
from django_zqueue.queue import Queue


def test_script_time_counts_the_function_calls_our_scripts_are_sent_as(
    q: Queue, redis_client: redis.Redis
) -> None:
    before = commandstats(redis_client)
    for _ in range(5):
        q.publish({"task": "t", "args": [], "kwargs": {}})
    after = commandstats(redis_client)
    # other tests may call scripts meanwhile (xdist): at least ours are counted, and they
    # went as FCALL (the command a reading of EVALSHA alone missed)
    assert after["fcall"][0] - before.get("fcall", (0, 0))[0] >= 5
    (calls0, usec0), (calls1, usec1) = script_usec(before), script_usec(after)
    assert calls1 - calls0 >= 5 and usec1 > usec0


def _peer(peer: str, single: float, best1: float, p99: float) -> list[dict[str, Any]]:
    """The harness's RESULT rows of one peer: an enqueue, one drain, a latency."""
    return [
        {"peer": peer, "phase": "enqueue", "mode": "single", "rate": single, "n": 100},
        {
            "peer": peer,
            "phase": "process",
            "variant": "best",
            "workers": 1,
            "ok": True,
            "rate_steady": best1,
            "done": 100,
        },
        {"peer": peer, "phase": "latency", "p50_ms": 0.5, "p99_ms": p99},
    ]


def _targets(ours_single: float, ours_best: float, cpu: dict[str, float]) -> dict[str, str]:
    out = {
        "peers": {
            "rows": _peer("zqueue", ours_single, ours_best, 0.9)
            + _peer("bullmq", 10_000, 19_000, 3.0)
            + _peer("huey", 12_000, 3_000, 1.5),
            "redis_cpu": cpu,
            "memory": {"zqueue": {"bytes_per_job": 224.0}},
        }
    }
    return {row[0].split(" [")[0]: row[3] for row in _report.targets(out)}


def test_the_targets_set_beside_bullmq_are_judged_on_the_same_run() -> None:
    cpu = {"zqueue enqueue": 100 * 10e-6, "zqueue process": 100 * 20e-6}
    got = _targets(12_100, 19_500, cpu)
    assert got["enqueue single ≥ 1.2x BullMQ's"] == "met"  # 12,100 ≥ 12,000
    assert got["processing, 1 process, best variant ≥ BullMQ's best"] == "met"
    assert got["Redis CPU per publish ≤ 12 µs (the whole phase / its jobs)"] == "met"
    assert got["Redis CPU per claim + ack ≤ 12 µs (the whole phase / its jobs)"] == "MISSED"
    assert got["Redis memory per queued job ≤ 200 B (RESTORE, steady)"] == "MISSED"
    assert got["latency p99 ≤ 0.8x Huey's"] == "met"  # 0.9 ≤ 1.2

    got = _targets(11_900, 18_000, {})
    assert got["enqueue single ≥ 1.2x BullMQ's"] == "MISSED"
    assert got["processing, 1 process, best variant ≥ BullMQ's best"] == "MISSED"
    assert got["Redis CPU per publish ≤ 12 µs (the whole phase / its jobs)"] == "not measured"


def test_the_script_time_line_says_each_drain() -> None:
    out = {
        "enqueue": {"single_redis_us": 10.54},
        "process": [
            {"variant": "x1", "scripts_redis_us_per_job": 13.06},
            {"variant": "x2", "scripts_redis_us_per_job": None},
        ],
    }
    line = _report.script_time_line(out)
    assert "one-call publish 10.5 µs" in line and "x1 13.1" in line and "x2" not in line
    assert _report.script_time_line({}) == ""
