"""Tenant fairness (``fairness="groups"``): how fair, and at what cost (docs/fairness.md).

    python -m bench.fairness [--redis-url URL] [--flood 100000] [--small 1000]
                             [--groups 10000] [--jobs 100000] [--idle 100000]

1. Flood: tenant ``flood`` publishes ``--flood`` jobs, a consumer starts working through
   them, then tenants ``s1`` and ``s2`` send ``--small`` jobs each. One consumer claims and
   acks one job at a time; the mean time per job is the "run time". Reports how long
   after being sent each small tenant's last job started, against the bound
   ``small x mean / share`` (share 1/3), and what a fifo queue would give (its rank x
   mean).
2. Weights 1:2:3: three backlogged groups; shares of the first starts and Jain's index
   over the weighted shares.
3. Cost: draining ``--jobs`` jobs with claim(100) + ack_many, plain (fifo) queue against a
   fair queue whose jobs are spread over ``--groups`` groups, and a fair queue with
   per-group limits that do not bind; run twice each, alternating (same run: only ratios
   mean anything on a shared host).
4. ``--idle`` groups of one job each, published and drained: Redis memory per idle group
   (used_memory delta after the drain), with and without limits (the limits' entries are
   swept by later claims: also measured after the sweep); a group at its limit with
   ``--flood`` jobs at the head. The longest script calls all along, from SLOWLOG.

Starts a private redis-server on a free port unless ``--redis-url`` is given (then only
keys under a fresh prefix are used, SLOWLOG is read, not configured). Bounded loops.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
django.setup()

import redis  # noqa: E402

from bench._redis import (  # noqa: E402
    Slowlog,
    loadavg,
    start_private,
    unlink_prefix,
)
from bench._redis import settled_memory as _settled_memory  # noqa: E402
from django_zqueue.conf import queue_options  # noqa: E402
from django_zqueue.engine.scripts import SCRIPT_NAMES, source  # noqa: E402
from django_zqueue.queue import Queue  # noqa: E402

BODY = {"task": "noop", "args": [0], "kwargs": {}}


def log(*a: Any) -> None:
    print("[fairness]", *a, file=sys.stderr, flush=True)


def make(client: redis.Redis, prefix: str, name: str, **options: Any) -> Queue:
    q = Queue(name, queue_options(name, **options), prefix=prefix, client=client)
    q.clear()
    return q


def publish_groups(q: Queue, groups: list[str]) -> None:
    """One job per entry of ``groups`` (its group key), 1000 per pipeline."""
    for i in range(0, len(groups), 1000):
        jobs = [q.prepare(BODY, group=g) for g in groups[i : i + 1000]]
        q.publish_prepared(jobs)


def flood(client: redis.Redis, prefix: str, a: argparse.Namespace) -> dict[str, Any]:
    q = make(client, prefix, "flood", fairness="groups")
    for i in range(0, a.flood, 1000):
        q.publish_many([BODY] * min(1000, a.flood - i), group="flood")
    t0 = time.perf_counter()
    warm = 2000
    for _ in range(warm):  # the flood is being served when the others arrive
        msgs, _ = q.claim(1)
        q.ack(msgs[0])
    mean = (time.perf_counter() - t0) / warm
    sent = time.perf_counter()
    small = {g: q.publish_many([BODY] * a.small, group=g) for g in ("s1", "s2")}
    last = {g: tags[-1] for g, tags in small.items()}
    fifo_rank = a.flood - warm + 2 * a.small - 1  # a fifo queue: behind the whole flood
    left = {t for tags in small.values() for t in tags}
    started: dict[str, float] = {}
    claims = 0
    while left and claims < 10 * a.small:
        msgs, _ = q.claim(1)
        claims += 1
        m = msgs[0]
        if m.tag in left:
            left.discard(m.tag)
            for g, t in last.items():
                if m.tag == t:
                    started[g] = time.perf_counter() - sent
        q.ack(m)
    spent = time.perf_counter() - sent
    mean_all = spent / claims
    bound = a.small * mean_all * 3
    q.clear()
    return {
        "small_jobs": 2 * a.small,
        "claims_until_last_small_started": claims,
        "claims_bound": 3 * a.small,  # small / share 1/3, for each small tenant
        "fifo_claims_until_last_small_started": fifo_rank + 1,
        "mean_ms_per_job": round(mean_all * 1000, 4),
        "mean_ms_per_job_before": round(mean * 1000, 4),
        "last_small_start_s": {g: round(s, 3) for g, s in started.items()},
        "bound_s": round(bound, 3),
        "within_bound": all(s <= bound for s in started.values()) and not left,
        "fifo_last_small_start_s": round(fifo_rank * mean_all, 3),
    }


def weights(client: redis.Redis, prefix: str, a: argparse.Namespace) -> dict[str, Any]:
    w = {"w1": 1, "w2": 2, "w3": 3}
    q = make(client, prefix, "weights", fairness="groups", group_weights=w)
    per = a.small * 12
    for g in w:
        for _ in range(0, per, 1000):
            q.publish_many([BODY] * 1000, group=g)
    starts = per  # every group stays backlogged (w3 gets half of them)
    count = dict.fromkeys(w, 0)
    done = 0
    while done < starts:
        msgs, _ = q.claim(min(100, starts - done))
        for m in msgs:
            count[
                str(json.loads(q.engine._client.hget(q.engine._keys.meta, m.tag) or b"{}").get("g"))
            ] += 1
        q.ack_many(msgs)
        done += len(msgs)
    total = sum(count.values())
    shares = {g: count[g] / total for g in w}
    x = [shares[g] / w[g] for g in w]
    jain = sum(x) ** 2 / (len(x) * sum(v * v for v in x))
    q.clear()
    return {
        "starts": total,
        "shares": {g: round(s, 4) for g, s in shares.items()},
        "expected": {g: round(w[g] / 6, 4) for g in w},
        "max_rel_error": round(max(abs(shares[g] * 6 / w[g] - 1) for g in w), 4),
        "jain_weighted": round(jain, 6),
    }


def drain_rate(q: Queue, n: int) -> float:
    t = time.perf_counter()
    done = 0
    while done < n:
        msgs, _ = q.claim(100)
        if not msgs:
            break
        q.ack_many(msgs)
        done += len(msgs)
    return done / (time.perf_counter() - t)


def cost(client: redis.Redis, prefix: str, a: argparse.Namespace) -> dict[str, Any]:
    variants = {
        "fifo": {},
        "fair": {"fairness": "groups"},
        "fair_limits": {"fairness": "groups", "group_concurrency": 1000, "group_qps": 1e5},
    }
    groups = [f"tenant-{i % a.groups}" for i in range(a.jobs)]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(2):
        for v, opts in variants.items():
            q = make(client, prefix, f"cost-{v}", **opts)
            publish_groups(q, groups)
            rates[v].append(drain_rate(q, a.jobs))
            q.clear()
            log(v, round(rates[v][-1]))
    best = {v: max(r) for v, r in rates.items()}
    return {
        "jobs": a.jobs,
        "groups": a.groups,
        "claim_ack_jobs_per_s": {v: [round(x) for x in r] for v, r in rates.items()},
        "ratio_fair_to_fifo": round(best["fair"] / best["fifo"], 3),
        "ratio_fair_limits_to_fifo": round(best["fair_limits"] / best["fifo"], 3),
    }


def idle_memory(
    client: redis.Redis, prefix: str, a: argparse.Namespace, slow: Slowlog | None = None
) -> dict[str, Any]:
    """Memory per group, active and idle. SLOWLOG entries are harvested (and so freed)
    before each reading: the log keeps up to 100,000 entries of this run's slow calls,
    and their memory would be counted as the groups'."""

    def settled_memory(client: redis.Redis) -> int:
        if slow is not None:
            slow.harvest()
        return _settled_memory(client)

    out: dict[str, Any] = {"groups": a.idle}
    groups = [f"tenant-{i}" for i in range(a.idle)]
    for v, opts in {
        "fair": {"fairness": "groups"},
        "fair_limits": {"fairness": "groups", "group_concurrency": 5, "group_qps": 10},
    }.items():
        q = make(client, prefix, f"idle-{v}", **opts)
        q.publish(BODY, group="warm-up")  # scripts loaded, keys made: not per group
        q.ack_many(q.claim(1)[0])
        q.claim(1)
        before = settled_memory(client)
        publish_groups(q, groups)
        active = settled_memory(client)
        drain_rate(q, a.idle)
        after = settled_memory(client)
        row = {
            "bytes_per_active_group_with_its_job": round((active - before) / a.idle, 1),
            "bytes_per_idle_group_after_drain": round((after - before) / a.idle, 1),
        }
        # two minutes on (moved by hand): the per-minute start counts rotate out
        minute = int(client.hget(q.engine._keys.ctr, "gmin") or 0)
        client.hset(q.engine._keys.ctr, "gmin", minute - 2)
        q.claim(1)
        row["bytes_per_idle_group_two_minutes_later"] = round(
            (settled_memory(client) - before) / a.idle, 1
        )
        if opts.get("group_concurrency"):
            sweeps = 0
            while client.zcard(q.engine._keys.ginflight) or client.hlen(q.engine._keys.grate):
                q.claim(1)  # an idle worker's claims sweep the limits' entries
                sweeps += 1
            row["claims_to_sweep"] = sweeps
            row["bytes_per_idle_group_after_sweep"] = round(
                (settled_memory(client) - before) / a.idle, 1
            )
        out[v] = row
        q.clear()
    return out


def blocked_head(client: redis.Redis, prefix: str, a: argparse.Namespace) -> dict[str, Any]:
    q = make(client, prefix, "blocked", fairness="groups", group_concurrency=1)
    for i in range(0, a.flood, 1000):
        q.publish_many([BODY] * min(1000, a.flood - i), group="big")
    q.claim(1)  # big is at its limit now
    for i in range(10):  # ten other groups, behind every job of big (a raw score)
        q.publish(BODY, group=f"other-{i}", score=a.flood + 1)
    calls, got = 0, 0
    t = time.perf_counter()
    while got < 10 and calls < a.flood:
        msgs, _ = q.claim(10)
        got += len(msgs)
        calls += 1
        q.ack_many(msgs)
    took = time.perf_counter() - t
    q.clear()
    return {
        "big_jobs_at_head": a.flood,
        "claim_calls_until_other_done": calls,
        "seconds": round(took, 3),
        "ms_per_call": round(took * 1000 / calls, 3),
    }


def script_times(
    client: redis.Redis, prefix: str, a: argparse.Namespace, slow: Slowlog, own: bool
) -> dict[str, Any]:
    """Server-side duration of every script call (SLOWLOG at 0 us, our own server only)
    with ``--idle`` groups queued: claim(100)+ack_many and publish of 100 jobs of new
    groups, with and without limits, and a blocked group's jobs at the head."""
    if not own:
        return {"skipped": "needs the bench's own redis-server (SLOWLOG at 0 us)"}
    times: dict[str, list[float]] = {}

    def record(fn: Any) -> None:
        slow.harvest()
        client.config_set("slowlog-log-slower-than", 0)
        try:
            fn()
        finally:
            client.config_set("slowlog-log-slower-than", slow.threshold_us)
        for e in client.slowlog_get(-1):
            cmd = e["command"]
            words = cmd.split()[:2] if isinstance(cmd, bytes | str) else list(cmd)[:2]
            words = [w.decode() if isinstance(w, bytes) else str(w) for w in words]
            if len(words) == 2 and words[0].lower() in ("evalsha", "fcall", "fcall_ro"):
                name = slow.by_sha.get(words[1].lower()) or slow.function_script(words[1])
                times.setdefault(name or "?", []).append(e["duration"] / 1000)
        client.slowlog_reset()

    for v, opts in {
        "": {"fairness": "groups"},
        "+limits": {"fairness": "groups", "group_concurrency": 5, "group_qps": 1000},
    }.items():
        q = make(client, prefix, f"times{v}", **opts)
        publish_groups(q, [f"tenant-{i}" for i in range(a.idle)])
        for _ in range(30):

            def step(q: Queue = q) -> None:
                msgs, _ = q.claim(100)
                q.ack_many(msgs)
                q.publish_prepared([q.prepare(BODY, group=uuid.uuid4().hex) for _ in range(100)])

            record(step)
        q.clear()
    blocked = make(client, prefix, "times-blocked", fairness="groups", group_concurrency=1)
    for _ in range(0, a.flood, 1000):
        blocked.publish_many([BODY] * 1000, group="big")
    blocked.claim(1)
    for _ in range(30):
        record(lambda: blocked.claim(100))  # sets 100 of big's jobs aside per call
    blocked.clear()

    def pct(xs: list[float], p: float) -> float:
        xs = sorted(xs)
        return round(xs[min(len(xs) - 1, int(len(xs) * p))], 3)

    return {
        name: {
            "calls": len(xs),
            "p50_ms": pct(xs, 0.5),
            "p99_ms": pct(xs, 0.99),
            "max_ms": round(max(xs), 3),
            "over_5ms": sum(x > 5 for x in xs),
        }
        for name, xs in sorted(times.items())
    }


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.fairness")
    ap.add_argument("--redis-url")
    ap.add_argument("--flood", type=int, default=100_000)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--idle", type=int, default=100_000)
    a = ap.parse_args()
    private = None if a.redis_url else start_private()
    url = a.redis_url or private.url  # type: ignore[union-attr]
    client = redis.Redis.from_url(url, socket_timeout=60)
    prefix = f"zqbf{uuid.uuid4().hex[:8]}"
    slow = Slowlog(client, private is not None, {n: source(n) for n in SCRIPT_NAMES})
    result: dict[str, Any] = {"load_before": loadavg()}
    try:
        for name, fn in (
            ("flood", flood),
            ("weights", weights),
            ("cost", cost),
            ("idle", lambda c, p, a: idle_memory(c, p, a, slow)),
            ("blocked_head", blocked_head),
        ):
            log(name)
            result[name] = fn(client, prefix, a)
            log(json.dumps(result[name]))
        log("script_times")
        result["script_times"] = script_times(client, prefix, a, slow, private is not None)
        log(json.dumps(result["script_times"]))
        result["slowlog"] = slow.summary()
        result["load_after"] = loadavg()
    finally:
        unlink_prefix(client, f"{{{prefix}:*")
        if private:
            private.stop()
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
