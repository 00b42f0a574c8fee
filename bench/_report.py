"""Turn the results of ``python -m bench`` into the printed table and latest.md."""

from __future__ import annotations

from typing import Any

from . import _cost

SELF = "django_zqueue (python -m bench)"
HARNESS_ZQ = "zqueue"


def fmt(x: Any, nd: int = 0) -> str:
    if x is None:
        return "-"
    if isinstance(x, float | int):
        return f"{x:,.{nd}f}"
    return str(x)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def plain(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ----------------------------------------------------------------------- figures


def _best(procs: list[dict[str, Any]], workers: int) -> dict[str, Any] | None:
    ok = [p for p in procs if p.get("ok") and p.get("workers", p.get("processes")) == workers]
    return max(ok, key=lambda p: p.get("rate_steady") or 0, default=None)


def harness_rows(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """peer -> headline figures of one harness run."""
    out: dict[str, dict[str, Any]] = {}
    for r in res.get("rows", []):
        p = r.get("peer")
        if not p:
            continue
        d = out.setdefault(p, {"procs": []})
        if r["phase"] == "enqueue":
            if r["mode"] == "single":
                d["single"] = r["rate"]
            elif r["mode"] in ("bulk", "concurrent"):
                d["bulk"] = r["rate"]
                d["bulk_mode"] = r["mode"]
        elif r["phase"] == "process":
            d["procs"].append(r)
            if r.get("headline") in ("1w", "2w"):
                d[r["headline"]] = r
        elif r["phase"] == "latency" and "lat" not in d:
            d["lat"] = r
    for p, d in out.items():
        d["best1"] = _best(d["procs"], 1)
        d["best2"] = _best(d["procs"], 2)
        d["memory"] = (res.get("memory") or {}).get(p, {}).get("bytes_per_job")
    return out


def self_row(out: dict[str, Any]) -> dict[str, Any]:
    enq = out.get("enqueue") or {}
    procs = [{**p, "workers": p["processes"]} for p in out.get("process") or []]
    d: dict[str, Any] = {
        "single": enq.get("single_per_s"),
        "bulk": enq.get("bulk_per_s"),
        "procs": procs,
        "lat": out.get("latency"),
        "memory": enq.get("memory_bytes_per_job"),
        "paired_evalsha": enq.get("paired_seq_script_per_s", enq.get("paired_seq_evalsha_per_s")),
        "best1": _best(procs, 1),
        "best2": _best(procs, 2),
    }
    for p in procs:
        if p.get("headline"):
            d[p["headline"]] = p
    return d


def _proc_cell(p: dict[str, Any] | None, with_name: bool = False) -> str:
    if not p:
        return "-"
    if not p.get("ok"):
        return "FAIL"
    s = fmt(p.get("rate_steady"))
    if with_name:
        s += f" [{p['variant']}]"
    return s + ("" if p.get("drained", True) else "*")


def _lat_cell(lat: dict[str, Any] | None) -> str:
    if not lat:
        return "-"
    if not lat.get("ok"):
        return "FAIL"
    return " / ".join(fmt(lat.get(k), 2) for k in ("p50_ms", "p95_ms", "p99_ms"))


def side_by_side(out: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "queue",
        "enqueue/s single",
        "enqueue/s bulk",
        "jobs/s 1 proc (default)",
        "jobs/s 2 procs (default)",
        "best 1-proc variant",
        "best 2-proc variant",
        "latency p50 / p95 / p99 ms",
        "Redis B/job",
    ]
    rows = []
    peers = harness_rows(out.get("peers") or {})
    for name in sorted(peers, key=lambda p: (p == HARNESS_ZQ, p)):
        d = peers[name]
        bulk = fmt(d.get("bulk")) + (" (gather)" if d.get("bulk_mode") == "concurrent" else "")
        label = "django_zqueue (harness)" if name == HARNESS_ZQ else name
        rows.append(
            [
                label,
                fmt(d.get("single")),
                bulk if d.get("bulk") else "n/a",
                _proc_cell(d.get("1w")),
                _proc_cell(d.get("2w")),
                _proc_cell(d.get("best1"), True),
                _proc_cell(d.get("best2"), True),
                _lat_cell(d.get("lat")),
                fmt(d.get("memory")),
            ]
        )
    s = self_row(out)
    rows.append(
        [
            SELF,
            fmt(s["single"]),
            fmt(s["bulk"]),
            _proc_cell(s.get("1w")),
            _proc_cell(s.get("2w")),
            _proc_cell(s.get("best1"), True),
            _proc_cell(s.get("best2"), True),
            _lat_cell(s.get("lat")),
            fmt(s.get("memory")),
        ]
    )
    return headers, rows


def ceilings(out: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Ceiling figures by source: 'self' (our run) and 'harness' (its py_ceiling)."""
    c = {"self": dict(out.get("ceiling_py") or {})}
    h = {r["test"]: r["rate"] for r in (out.get("peers") or {}).get("ceiling_py", [])}
    if h:
        c["harness"] = h
    return c


def fractions(out: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Each figure as a share of what one redis-py connection does on the same server."""
    headers = [
        "queue",
        "enqueue single ÷ seq FCALL/EVALSHA",
        "enqueue bulk ÷ pipelined EVALSHA (batch 100)",
        "1 proc ÷ seq INCR",
        "2 procs ÷ seq INCR",
    ]
    cs = ceilings(out)
    rows = []

    def share(x: float | None, base: float | None) -> str:
        return f"{x / base:.2f}" if x and base else "-"

    peers = harness_rows(out.get("peers") or {})
    hc = cs.get("harness", {})
    for name in sorted(peers, key=lambda p: (p == HARNESS_ZQ, p)):
        d = peers[name]
        rows.append(
            [
                "django_zqueue (harness)" if name == HARNESS_ZQ else name,
                share(d.get("single"), hc.get("seq EVALSHA zadd")),
                share(d.get("bulk"), hc.get("pipeline EVALSHA batch=100")),
                share((d.get("1w") or {}).get("rate_steady"), hc.get("seq INCR")),
                share((d.get("2w") or {}).get("rate_steady"), hc.get("seq INCR")),
            ]
        )
    sc = cs["self"]
    s = self_row(out)
    rows.append(
        [
            SELF,
            share(s["single"], s.get("paired_evalsha") or sc.get("seq EVALSHA zadd")),
            share(s["bulk"], sc.get("pipeline EVALSHA zadd batch=100")),
            share((s.get("1w") or {}).get("rate_steady"), sc.get("seq INCR")),
            share((s.get("2w") or {}).get("rate_steady"), sc.get("seq INCR")),
        ]
    )
    return headers, rows


def script_time_line(out: dict[str, Any]) -> str:
    """Redis's own time for our scripts (INFO commandstats) in this command's run: one
    publish call, and the worker's script calls per job each drain variant did; '' when
    not measured."""
    pub = (out.get("enqueue") or {}).get("single_redis_us")
    drains = [
        f"{p['variant']} {fmt(p['scripts_redis_us_per_job'], 1)}"
        for p in out.get("process") or []
        if p.get("scripts_redis_us_per_job") is not None
    ]
    if pub is None and not drains:
        return ""
    return (
        f"Redis time of our scripts (INFO commandstats): one-call publish {fmt(pub, 1)} µs; "
        f"claim + ack and the rest per job drained: {', '.join(drains) or '-'} µs"
    )


# ----------------------------------------------------------------------- targets


def targets(out: dict[str, Any]) -> list[list[Any]]:
    """The issue's targets: [target, ours, reference, met, by how much]."""
    peers = harness_rows(out.get("peers") or {})
    ours_h = peers.pop(HARNESS_ZQ, None)
    s = self_row(out)
    ours = ours_h or s  # side by side: the harness's own zqueue run (same method, same run)
    src = "harness" if ours_h else "python -m bench"
    rows: list[list[Any]] = []

    def row(name: str, value: float | None, ref: float | None, ok_if_le: bool, unit: str) -> None:
        if value is None or ref is None:
            rows.append([name, fmt(value, 2), fmt(ref, 2), "not measured", ""])
            return
        met = value <= ref if ok_if_le else value >= ref
        gap = (value / ref - 1) * 100 if ref else 0.0
        how = "" if met else f"missed by {abs(gap):.0f}% ({fmt(value, 2)} vs {fmt(ref, 2)} {unit})"
        rows.append(
            [
                name,
                f"{fmt(value, 2)} {unit}",
                f"{fmt(ref, 2)} {unit}",
                "met" if met else "MISSED",
                how,
            ]
        )

    for key, label in (("1w", "1 process"), ("2w", "2 processes")):
        best_peer = max(
            ((p, (d.get(key) or {}).get("rate_steady") or 0) for p, d in peers.items()),
            key=lambda t: t[1],
            default=(None, None),
        )
        ref = 2 * best_peer[1] if best_peer[1] else None
        row(
            f"processing, {label}, default settings ≥ 2x best peer default "
            f"({best_peer[0]}) [{src}]",
            (ours.get(key) or {}).get("rate_steady"),
            ref,
            False,
            "jobs/s",
        )
        bkey = "best1" if key == "1w" else "best2"
        best_any = max(
            ((p, (d.get(bkey) or {}).get("rate_steady") or 0) for p, d in peers.items()),
            key=lambda t: t[1],
            default=(None, None),
        )
        row(
            f"processing, {label}, best variant ≥ 2x best peer variant ({best_any[0]}) [{src}]",
            (ours.get(bkey) or {}).get("rate_steady"),
            2 * best_any[1] if best_any[1] else None,
            False,
            "jobs/s",
        )
    cs = ceilings(out)
    c = cs.get("harness") if ours_h else cs["self"]
    evalsha = (c or {}).get("seq EVALSHA zadd")
    if not ours_h and s.get("paired_evalsha"):
        evalsha = s["paired_evalsha"]
    row(
        f"enqueue single ≥ 90% of seq FCALL/EVALSHA on the same server [{src}]",
        ours.get("single"),
        0.9 * evalsha if evalsha else None,
        False,
        "jobs/s",
    )
    rq_bulk = (peers.get("rq") or {}).get("bulk")
    row(
        f"enqueue bulk ≥ 3x rq enqueue_many [{src}]",
        ours.get("bulk"),
        3 * rq_bulk if rq_bulk else None,
        False,
        "jobs/s",
    )
    lat = ours.get("lat") or {}
    row(f"latency p50 ≤ 1.2 ms [{src}]", lat.get("p50_ms"), 1.2, True, "ms")
    row(f"latency p99 ≤ 2 ms [{src}]", lat.get("p99_ms"), 2.0, True, "ms")
    big = out.get("big") or {}
    for op in ("rank", "score", "exists"):
        row(
            f"{op} p99 ≤ 1 ms at {fmt(big.get('n'))} queued",
            big.get(f"{op}_p99_ms"),
            1.0,
            True,
            "ms",
        )
    mem = {p: d.get("memory") for p, d in peers.items() if d.get("memory")}
    if mem:
        lean = min(mem, key=lambda p: mem[p])
        ours_mem = (ours_h or {}).get("memory") or s.get("memory")
        row(
            f"Redis memory per queued job ≤ leanest peer ({lean}), same RESTORE method",
            ours_mem,
            mem[lean],
            True,
            "B",
        )
    else:
        row("Redis memory per queued job ≤ leanest peer", s.get("memory"), None, True, "B")
    sc = out.get("script_calls") or {}
    row("no single script call over 5 ms (SLOWLOG)", sc.get("max_script_ms"), 5.0, True, "ms")
    # the performance targets set side by side with Huey and the INCR ceiling
    huey = peers.get("huey") or {}
    row(
        f"enqueue single ≥ 1.0x Huey's [{src}]",
        ours.get("single"),
        huey.get("single"),
        False,
        "jobs/s",
    )
    huey_p99 = (huey.get("lat") or {}).get("p99_ms")
    row(
        f"latency p99 ≤ 0.8x Huey's [{src}]",
        lat.get("p99_ms"),
        0.8 * huey_p99 if huey_p99 else None,
        True,
        "ms",
    )
    # beside BullMQ, the peer with our guarantees (Lua scripts, priorities, a kept history)
    bull = peers.get("bullmq") or {}
    row(
        f"enqueue single ≥ 1.2x BullMQ's [{src}]",
        ours.get("single"),
        1.2 * bull["single"] if bull.get("single") else None,
        False,
        "jobs/s",
    )
    row(
        f"processing, 1 process, best variant ≥ BullMQ's best [{src}]",
        (ours.get("best1") or {}).get("rate_steady"),
        (bull.get("best1") or {}).get("rate_steady"),
        False,
        "jobs/s",
    )
    ours_cost = _cost.per_job(out.get("peers") or {}).get("zqueue") or {}
    for key, what in (("publish_us", "publish"), ("claim_ack_us", "claim + ack")):
        row(
            f"Redis CPU per {what} ≤ 12 µs (the whole phase / its jobs) [harness]",
            ours_cost.get(key),
            12.0,
            True,
            "µs",
        )
    row(
        "Redis memory per queued job ≤ 200 B (RESTORE, steady) [harness snapshot]",
        (ours_h or {}).get("memory"),
        200.0,
        True,
        "B",
    )
    incr = (c or {}).get("seq INCR")
    for key, label in (("1w", "1 process"), ("2w", "2 processes")):
        row(
            f"processing, {label}, default settings ≥ 0.95 of seq INCR [{src}]",
            (ours.get(key) or {}).get("rate_steady"),
            0.95 * incr if incr else None,
            False,
            "jobs/s",
        )
    for op in ("rank", "score"):
        row(
            f"{op} p99 ≤ 0.3 ms at {fmt(big.get('n'))} queued",
            big.get(f"{op}_p99_ms"),
            0.3,
            True,
            "ms",
        )
    return rows


# ----------------------------------------------------------------------- rendering


def render(out: dict[str, Any]) -> tuple[str, str]:
    h, rows = side_by_side(out)
    printed = [plain(h, rows)]
    big = out.get("big") or {}
    if big:
        printed.append(
            f"\nat {fmt(big['n'])} queued: "
            + ", ".join(
                f"{op} p50 {fmt(big.get(f'{op}_p50_ms'), 3)} / "
                f"p99 {fmt(big.get(f'{op}_p99_ms'), 3)} ms"
                for op in ("rank", "score", "exists")
            )
            + f"; memory {fmt(big.get('memory_bytes_per_job'))} B/job"
        )
    sc = out.get("script_calls") or {}
    if sc:
        printed.append(f"longest script call (SLOWLOG): {fmt(sc.get('max_script_ms'), 2)} ms")
    if redis_time := script_time_line(out):
        printed.append(redis_time)
    c = out.get("ceiling_py") or {}
    if c:
        printed.append(
            "ceiling (one redis-py connection): "
            + ", ".join(f"{k} {fmt(v)}/s" for k, v in c.items())
        )
    cost = _cost.table_rows(out.get("peers") or {})
    if cost:
        printed.append("\nRedis cost of a job (Redis CPU, see bench/_cost.py)")
        printed.append(plain(_cost.HEADERS, cost))
    tr = targets(out)
    printed.append("\n" + plain(["target", "ours", "needed", "", ""], tr))
    md = markdown(out, h, rows, tr)
    return "\n".join(printed), md


def markdown(out: dict[str, Any], h: list[str], rows: list[list[Any]], tr: list[list[Any]]) -> str:
    v = out.get("versions", {})
    m = out.get("machine", {})
    dirty = (
        ", django_zqueue/ has uncommitted changes"
        if v.get("git", {}).get("django_zqueue_dirty")
        else ""
    )
    parts = [
        "# django_zqueue benchmark (`python -m bench`)",
        "",
        f"Run {out.get('started')} · {fmt(out.get('wall_s'))} s wall · N = {fmt(out.get('n'))} · "
        f"big = {fmt(out.get('big_n'))} · private server: {out.get('private_server')} · "
        f"load average {out.get('loadavg')}",
        "",
        f"Machine: {m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('memory')}, "
        f"kernel {m.get('kernel')}, Python {m.get('python')}. Redis "
        f"{(out.get('redis_server') or {}).get('redis_version')} "
        f"(save={(out.get('redis_server') or {}).get('save')!r}, "
        f"appendonly={(out.get('redis_server') or {}).get('appendonly')}).",
        "",
        f"Versions: django_zqueue {v.get('django_zqueue')} (git {v.get('git', {}).get('head')}"
        f"{dirty}), "
        f"Django {v.get('django')}, redis-py {v.get('redis_py')}, hiredis {v.get('hiredis')}.",
        "",
        "## Side by side",
        "",
        table(h, rows),
        "",
        "`*` = time-boxed before the queue drained (rate over the time box). Peers and "
        "`django_zqueue (harness)` come from the shared harness in this same run; the last "
        "row is this command's own measurement. Redis B/job: peers and the harness row = "
        "each queue's 20,000-job snapshot RESTOREd into an empty server, used_memory once "
        "steady (the harness's own memory line reads it at once); last row = "
        "used_memory delta after enqueue_many of N jobs.",
        "",
        *(
            ["## Redis cost of a job", "", table(_cost.HEADERS, cost), "", _cost.__doc__ or "", ""]
            if (cost := _cost.table_rows(out.get("peers") or {}))
            else []
        ),
        "## As a share of the Redis ceiling (same server)",
        "",
        table(*fractions(out)),
        "",
        "## Targets",
        "",
        table(["target", "ours", "needed", "status", "gap"], tr),
        "",
    ]
    procs = out.get("process") or []
    if procs:
        parts += [
            "## Processing variants (python -m bench)",
            "",
            table(
                [
                    "variant",
                    "processes",
                    "jobs/s steady",
                    "jobs/s incl. startup",
                    "startup s",
                    "done",
                    "CPU cores: workers / redis / machine / else",
                    "command",
                ],
                [
                    [
                        p["variant"],
                        p["processes"],
                        _proc_cell(p),
                        fmt(p.get("rate")),
                        fmt(p.get("startup_s"), 2),
                        f"{p['done']}/{p['n']}",
                        " / ".join(
                            fmt((p.get("cpu_cores") or {}).get(k), 2)
                            for k in ("workers", "redis_server", "machine", "everything_else")
                        ),
                        "<br>".join(f"`{c}`" for c in p["cmd"]),
                    ]
                    for p in procs
                ],
            ),
            "",
        ]
    big = out.get("big") or {}
    if big:
        parts += [
            f"## {fmt(big['n'])} jobs queued",
            "",
            table(
                ["op", "p50 ms", "p99 ms", "max ms"],
                [
                    [
                        op,
                        fmt(big.get(f"{op}_p50_ms"), 3),
                        fmt(big.get(f"{op}_p99_ms"), 3),
                        fmt(big.get(f"{op}_max_ms"), 3),
                    ]
                    for op in ("rank", "score", "exists")
                ],
            ),
            "",
            f"Fill: {fmt(big.get('fill_s'), 1)} s ({fmt(big.get('fill_per_s'))} jobs/s, "
            f"enqueue_many by 10,000); memory {fmt(big.get('memory_bytes_per_job'))} B/job; "
            f"rank of the last "
            f"job ({fmt(big.get('rank_of_last'))}) in {fmt(big.get('rank_of_last_ms'), 3)} ms.",
            "",
            "Server time per lookup (INFO commandstats delta): "
            + ", ".join(
                f"{k} {fmt(x, 1)} µs" for k, x in (big.get("server_usec_per_call") or {}).items()
            ),
            "",
            "Single calls at that size: client-side time (round trip included) and the "
            "longest script call the server logged for it (SLOWLOG at 0 µs; own server only):",
            "",
            table(
                ["call", "client ms", "server ms (longest script)"],
                [
                    [k, fmt(x, 2), fmt((big.get("server_call_max_ms") or {}).get(k), 2)]
                    for k, x in (big.get("client_call_ms") or {}).items()
                ],
            ),
            "",
        ]
    sc = out.get("script_calls") or {}
    if sc:
        parts += [
            "## Script call durations (server side)",
            "",
            f"SLOWLOG threshold {fmt(sc.get('slowlog_threshold_us'))} µs "
            f"({'set by the bench' if sc.get('slowlog_set_by_bench') else 'the server setting'}); "
            f"longest script call {fmt(sc.get('max_script_ms'), 2)} ms; longest other command "
            f"{fmt(sc.get('max_other_command_ms'), 2)} ms.",
            "",
            *([line, ""] if (line := script_time_line(out)) else []),
            table(
                [
                    "script",
                    "calls logged (over the threshold, or timed at 0 µs)",
                    "over 5 ms",
                    "longest 5, ms",
                ],
                [
                    [
                        k,
                        x["count_logged"],
                        x.get("over_5ms", "?"),
                        ", ".join(fmt(v, 2) for v in x.get("top_ms", [x["max_ms"]])),
                    ]
                    for k, x in sc.get("per_script", {}).items()
                ],
            ),
            "",
            table(
                ["commandstats", "calls", "µs per call"],
                [
                    [k[8:], fmt(x["calls"]), fmt(x["usec_per_call"], 2)]
                    for k, x in sc.get("commandstats", {}).items()
                ],
            ),
            "",
        ]
    c = out.get("ceiling_py") or {}
    if c:
        parts += [
            "## Redis ceiling, one redis-py connection (python -m bench)",
            "",
            table(["test", "ops/s"], [[k, fmt(x)] for k, x in c.items()]),
            "",
        ]
    rb = out.get("ceiling_redis_benchmark") or []
    if rb:
        parts += [
            "redis-benchmark:",
            "",
            table(
                ["test", "-P", "-c", "ops/s", "p50 ms", "p99 ms"],
                [
                    [
                        r["test"],
                        r["pipeline"],
                        r["clients"],
                        fmt(r["rps"]),
                        r["p50_ms"],
                        r["p99_ms"],
                    ]
                    for r in rb
                ],
            ),
            "",
        ]
    peers = out.get("peers") or {}
    if peers:
        hc = {r["test"]: r["rate"] for r in peers.get("ceiling_py", [])}
        parts += [
            "## Shared harness",
            "",
            f"Ran in `{peers.get('harness_dir')}` (results `{peers.get('run_dir')}`, "
            f"full report `{peers.get('results_md')}`); "
            f"same Redis server as above: {peers.get('same_server')}.",
            "",
            "Its ceiling (redis-py, same server): "
            + ", ".join(f"{k} {fmt(x)}/s" for k, x in hc.items()),
            "",
        ]
        if peers.get("ceiling_redis_benchmark_csv"):
            parts += [
                "redis-benchmark (harness):",
                "",
                "```",
                peers["ceiling_redis_benchmark_csv"].strip(),
                "```",
                "",
            ]
        vers = peers.get("versions") or {}
        keys = [
            "rq",
            "celery",
            "kombu",
            "dramatiq",
            "huey",
            "arq",
            "taskiq",
            "taskiq-redis",
            "django-q2",
            "django",
            "redis",
            "hiredis",
        ]
        parts += [
            table(
                ["venv", "packages"],
                [
                    [name, ", ".join(f"{k} {pk[k]}" for k in keys if k in pk)]
                    for name, pk in sorted(vers.items())
                ],
            ),
            "",
        ]
        hz = [
            r
            for r in peers.get("rows", [])
            if r.get("peer") == HARNESS_ZQ and r.get("phase") == "process"
        ]
        if hz:
            parts += [
                "django_zqueue in the harness, all variants:",
                "",
                table(
                    [
                        "variant",
                        "procs",
                        "jobs/s steady",
                        "jobs/s incl. startup",
                        "startup s",
                        "command",
                    ],
                    [
                        [
                            r["variant"],
                            r["workers"],
                            _proc_cell(r),
                            fmt(r.get("rate")),
                            fmt(r.get("startup_s"), 2),
                            "<br>".join(f"`{c.split('manage.py ')[-1]}`" for c in r["cmd"]),
                        ]
                        for r in hz
                    ],
                ),
                "",
            ]
    return "\n".join(parts)
