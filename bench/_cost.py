"""The Redis cost of a job for every queue of the shared harness (``python -m bench
--peers``): Redis CPU µs per job to publish (the peer's ``enqueue.py``: its single and
bulk enqueues) and to claim and ack (its ``process.py``: every variant's drain, the
prefill or snapshot RESTORE and the workers' polling included), and Redis bytes per
queued job (the harness's snapshot RESTOREd into an empty server, as the side-by-side
table). The CPU is the redis-server main thread's (``INFO cpu``), read at each phase
line of ``run_all.sh`` (:class:`bench._harness.PhaseCpu`), so a busy host's waits for a
core are not counted."""

from __future__ import annotations

from typing import Any

HEADERS = [
    "queue",
    "publish µs/job",
    "claim + ack µs/job",
    "Redis B/job",
    "jobs (publish; drained)",
]


def _jobs(rows: list[dict[str, Any]], peer: str) -> tuple[int, int]:
    """Jobs enqueued by ``enqueue.py`` and drained by ``process.py`` of ``peer``."""
    enq = sum(
        int(r.get("n") or 0) for r in rows if r.get("peer") == peer and r["phase"] == "enqueue"
    )
    done = sum(
        int(r.get("done_after_kill") or r.get("done") or 0)
        for r in rows
        if r.get("peer") == peer and r["phase"] == "process"
    )
    return enq, done


def per_job(res: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """peer -> publish_us, claim_ack_us (Redis CPU µs per job), bytes (per queued job)."""
    cpu: dict[str, float] = res.get("redis_cpu") or {}
    rows: list[dict[str, Any]] = res.get("rows") or []
    memory = res.get("memory") or {}
    out: dict[str, dict[str, float | None]] = {}
    for peer in sorted({r["peer"] for r in rows if r.get("peer")}):
        enq, done = _jobs(rows, peer)
        pub, proc = cpu.get(f"{peer} enqueue"), cpu.get(f"{peer} process")
        out[peer] = {
            "publish_us": pub * 1e6 / enq if pub is not None and enq else None,
            "claim_ack_us": proc * 1e6 / done if proc is not None and done else None,
            "bytes": (memory.get(peer) or {}).get("bytes_per_job"),
            "published": enq,
            "drained": done,
        }
    return out


def table_rows(res: dict[str, Any]) -> list[list[Any]]:
    def cell(x: float | None, nd: int = 1) -> str:
        return "-" if x is None else f"{x:,.{nd}f}"

    label = {"zqueue": "django_zqueue"}
    return [
        [
            label.get(p, p),
            cell(d["publish_us"]),
            cell(d["claim_ack_us"]),
            cell(d["bytes"], 0),
            f"{int(d['published'] or 0):,}; {int(d['drained'] or 0):,}",
        ]
        for p, d in per_job(res).items()
    ]
