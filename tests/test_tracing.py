"""OpenTelemetry: a producer span at enqueue, a consumer span per run linked to it through
the trace context carried in the job's body, trace ids in log lines; and nothing at all
(not even an import) without opentelemetry installed. Spans are read back from the SDK's
in-memory exporter."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from django_zqueue import get_queue
from django_zqueue.tasks import tracing
from django_zqueue.worker import Worker
from testproject.demo import async_tasks as at
from testproject.demo import tasks

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process (the API refuses a second)
    if trace.get_tracer_provider() is not provider:
        pytest.skip("another tracer provider is set in this process")


@pytest.fixture
def spans(project: dict[str, str]) -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def by_name(found: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def burst(**kwargs: Any) -> Worker:
    w = Worker(["default"], burst=True, scan_interval=0.05, **kwargs)
    w.run()
    return w


def test_a_run_is_the_child_of_the_enqueue_inside_the_request(spans: Any) -> None:
    tracer = trace.get_tracer("test")
    tasks.noop.enqueue()  # ahead in line: the traced job's rank is 1
    with tracer.start_as_current_span("GET /signup") as request:
        job = tasks.add.enqueue(2, 3)
    burst()
    assert job.result() == 5
    found = spans.get_finished_spans()
    (send,) = [
        s for s in by_name(found, "send default") if s.attributes["zqueue.task"].endswith(".add")
    ]
    (run,) = [
        s for s in by_name(found, "process default") if s.attributes["zqueue.task"].endswith(".add")
    ]
    req = request.get_span_context()
    # one trace: request -> send (producer) -> process (consumer)
    assert send.context.trace_id == run.context.trace_id == req.trace_id
    assert send.parent is not None and send.parent.span_id == req.span_id
    assert run.parent is not None and run.parent.span_id == send.context.span_id
    assert send.kind == SpanKind.PRODUCER and run.kind == SpanKind.CONSUMER
    assert dict(send.attributes) == {
        "messaging.system": "django_zqueue",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": job.id,
        "zqueue.task": "testproject.demo.tasks.add",
        "zqueue.rank": 1,
    }
    attrs = dict(run.attributes)
    wait_ms = attrs.pop("zqueue.wait_ms")
    assert isinstance(wait_ms, int) and wait_ms >= 0
    assert attrs == {
        "messaging.system": "django_zqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": job.id,
        "zqueue.task": "testproject.demo.tasks.add",
        "zqueue.attempt": 1,
        "zqueue.outcome": "success",
    }
    # the context travels in the body's envelope, nothing else in the record changed
    acked = get_queue("default").info(job.id)  # acked: kept in the history
    assert acked is not None and acked.state == "succeeded"


def test_every_retry_links_to_the_one_enqueue_and_failures_are_errors(
    spans: Any, tmp_path: Path
) -> None:
    job = at.always_fails.enqueue(str(tmp_path / "ledger"))
    burst(async_concurrency=2)  # the async lane's runs
    found = spans.get_finished_spans()
    (send,) = by_name(found, "send default")
    runs = sorted(by_name(found, "process default"), key=lambda s: s.attributes["zqueue.attempt"])
    assert [r.attributes["zqueue.attempt"] for r in runs] == [1, 2, 3]
    assert [r.attributes["zqueue.outcome"] for r in runs] == ["retry", "retry", "dead"]
    for r in runs:
        assert r.parent is not None and r.parent.span_id == send.context.span_id
        assert r.context.trace_id == send.context.trace_id
        assert r.attributes["messaging.message.id"] == job.id
        assert r.status.status_code == StatusCode.ERROR
        assert [e.name for e in r.events] == ["exception"]


def test_aenqueue_is_traced_alike(spans: Any) -> None:
    import asyncio

    tracer = trace.get_tracer("test")

    async def view() -> Any:
        with tracer.start_as_current_span("GET /async-view"):
            return await at.aadd.aenqueue(1, 1)

    job = asyncio.run(view())
    burst(async_concurrency=2)
    assert job.result() == 2
    found = spans.get_finished_spans()
    (request,) = by_name(found, "GET /async-view")
    (send,) = by_name(found, "send default")
    (run,) = by_name(found, "process default")
    assert send.parent is not None and send.parent.span_id == request.context.span_id
    assert run.parent is not None and run.parent.span_id == send.context.span_id
    assert send.attributes["zqueue.rank"] == 0


def test_a_batch_and_a_deferred_enqueue(spans: Any) -> None:
    from django.db import transaction

    tasks.noop.enqueue_many([(), (), ()])
    (batch,) = by_name(spans.get_finished_spans(), "send default")
    assert batch.attributes["messaging.batch.message_count"] == 3
    assert "zqueue.rank" not in batch.attributes
    spans.clear()
    with pytest.MonkeyPatch.context() as mp:
        # inside a transaction the jobs go out at commit: the span says so, without a rank
        mp.setattr(transaction, "get_connection", lambda using=None: _InAtomic())
        mp.setattr(transaction, "on_commit", lambda fn, using=None, robust=False: fn())
        tasks.noop.enqueue()
    (deferred,) = by_name(spans.get_finished_spans(), "send default")
    assert deferred.attributes["zqueue.deferred"] is True
    assert "zqueue.rank" not in deferred.attributes


class _InAtomic:
    in_atomic_block = True


def test_a_failed_enqueue_ends_its_span_as_an_error(spans: Any) -> None:
    from django_zqueue.exceptions import DuplicateJob

    tagged = tasks.noop.using(tag="one")
    tagged.enqueue()
    with pytest.raises(DuplicateJob):
        tagged.enqueue()
    failed = by_name(spans.get_finished_spans(), "send default")[-1]
    assert failed.status.status_code == StatusCode.ERROR


def test_log_lines_carry_the_trace_id_of_the_run(
    spans: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks.always_fails.using(max_retries=0).enqueue(str(tmp_path / "ledger"))
    with caplog.at_level(logging.WARNING, logger="django_zqueue.worker"):
        burst()
    (run,) = by_name(spans.get_finished_spans(), "process default")
    failed = [r.getMessage() for r in caplog.records if "event=job_failed" in r.getMessage()]
    assert len(failed) == 1
    assert f"trace_id={run.context.trace_id:032x}" in failed[0]
    assert f"span_id={run.context.span_id:016x}" in failed[0]


def test_trace_context_filter_for_a_projects_handlers() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    tracing.TraceContextFilter().filter(record)
    assert (record.trace_id, record.span_id) == ("", "")  # type: ignore[attr-defined]
    with trace.get_tracer("test").start_as_current_span("s") as span:
        tracing.TraceContextFilter().filter(record)
    assert record.trace_id == f"{span.get_span_context().trace_id:032x}"  # type: ignore[attr-defined]


def test_a_job_enqueued_without_trace_context_runs_in_a_trace_of_its_own(spans: Any) -> None:
    q = get_queue("default")
    q.publish({"task": "testproject.demo.tasks.noop", "args": [], "kwargs": {}})  # old body
    burst()
    (run,) = by_name(spans.get_finished_spans(), "process default")
    assert run.parent is None


def test_without_opentelemetry_nothing_is_imported_and_jobs_run(project: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if not installed\n"
        "import django; django.setup()\n"
        "from django_zqueue import events\nfrom django_zqueue.tasks import tracing\n"
        "assert not tracing.ENABLED and events.trace_ids() is None\n"
        "from django_zqueue.worker import Worker\n"
        "from testproject.demo import tasks\n"
        "job = tasks.add.enqueue(1, 2)\n"
        "assert 'tc' not in job.info().body\n"
        "Worker(['default'], burst=True).run()\n"
        "assert job.result() == 3\n"
        "loaded = [m for m, v in sys.modules.items() if m.startswith('opentelemetry') and v]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=project, check=True, timeout=120)


def test_installed_but_no_tracer_provider_makes_no_span(project: dict[str, str]) -> None:
    """With opentelemetry-api installed and no provider configured, an enqueue and a run
    make no span (the API's spans would record nothing) and jobs carry no trace context."""
    code = (
        "import django; django.setup()\n"
        "from django_zqueue.tasks import tracing\n"
        "assert tracing.ENABLED and tracing.start_send('default', 't', 1) is None\n"
        "from django_zqueue.worker import Worker\n"
        "from testproject.demo import tasks\n"
        "job = tasks.add.enqueue(1, 2)\n"
        "assert 'tc' not in job.info().body\n"
        "Worker(['default'], burst=True).run()\n"
        "assert job.result() == 3\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "span = tracing.start_send('default', 't', 1)\n"
        "assert span is not None and span.is_recording()\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=project, check=True, timeout=120)


def test_a_worker_asks_for_a_tracer_provider_at_most_once_a_second_while_none_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a provider the answer is kept for RECHECK_SECONDS (a provider set meanwhile
    is seen after that); with one, every run asks (and gets its span)."""
    answers = [False, False, True, True]
    asked: list[bool] = []

    def live() -> bool:
        asked.append(answers[len(asked)])
        return asked[-1]

    monkeypatch.setattr(tracing, "_live", live)
    switch = tracing.Switch()
    assert not switch.live(100.0) and len(asked) == 1
    assert not switch.live(100.0 + tracing.RECHECK_SECONDS * 0.99) and len(asked) == 1
    assert not switch.live(100.0 + tracing.RECHECK_SECONDS) and len(asked) == 2
    assert switch.live(101.0 + tracing.RECHECK_SECONDS) and len(asked) == 3
    assert switch.live(101.0 + tracing.RECHECK_SECONDS) and len(asked) == 4


def test_a_job_released_for_an_outage_says_so_on_its_span(
    spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_zqueue import chain
    from django_zqueue.exceptions import QueueUnavailable
    from django_zqueue.queue.flow import Flows

    real, calls = Flows.passed_results, []

    def flaky(self: Flows, tag: str) -> list[Any]:
        calls.append(tag)
        if len(calls) == 1:
            raise QueueUnavailable("Redis is unavailable: Connection refused")
        return real(self, tag)

    monkeypatch.setattr(Flows, "passed_results", flaky)
    flow = chain(tasks.add.s(1, 2), tasks.add.s(3)).enqueue()
    for _ in range(3):
        if not burst().processed:
            break
    second = flow.jobs[1].id
    runs = [
        s
        for s in by_name(spans.get_finished_spans(), "process default")
        if s.attributes["messaging.message.id"] == second
    ]
    assert [r.attributes["zqueue.outcome"] for r in runs] == ["released", "success"]
