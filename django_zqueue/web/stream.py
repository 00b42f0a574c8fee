"""A job's streamed output and its position for the person waiting on it, as
server-sent events: ``GET stream/<token>/`` (``django_zqueue:stream``), the same signed
token as the position (docs/position.md, "Streamed output").

The response is ``text/event-stream``, open for at most :data:`WINDOW` seconds; the
browser's ``EventSource`` then connects again by itself and sends the id of the last
chunk it got (``Last-Event-ID``), from which the next response resumes: no gap, no
duplicate. Events:

- ``position``: the position's JSON (as the position endpoint answers), at the start
  and whenever its status, rank or progress changes;
- ``chunk``: one chunk the job streamed (``current_job().stream``), ``{"text": ...}``,
  with its ``id``;
- ``end``: the job ended (done, failed, cancelled, expired: the position's JSON) and
  every chunk was sent; the response ends and the page closes its ``EventSource``.

Each response reads the job's stream every :data:`POLL` seconds (one ``XRANGE``) and
its position through the queue's one shared poll (:class:`~django_zqueue.tasks.watch.Watch`).
Under WSGI each open response holds one server thread for its window.

An invalid, forged or expired token, a job made for another user and an unknown queue
all answer the position endpoint's 404; a cursor that is not a chunk id a 400.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..engine.jobstreams import check_cursor
from ..exceptions import InvalidArgument, QueueUnavailable, UnknownQueue
from ..queue import get_queue
from ..tasks.job import Job
from ..tasks.watch import Watch, read_token, watch_of
from .position import allowed, not_found, payload

#: seconds one response stays open before the browser connects again
WINDOW = 25.0
#: seconds between two reads of the job's stream while nothing new came
POLL = 0.2
#: the statuses after which nothing changes (``tasks.watch.FINAL``)
ENDED = frozenset({"done", "failed", "cancelled", "expired"})


def _event(kind: str, data: dict[str, Any], id: str | None = None) -> str:
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def events(job: Job, watch: Watch, after: str, window: float | None = None) -> Iterator[str]:
    """The events of ``job`` from the cursor ``after``, for ``window`` seconds at most
    (None: :data:`WINDOW`; see the module docstring)."""
    deadline = time.monotonic() + (WINDOW if window is None else window)
    version: str | None = None
    yield "retry: 1000\n\n"
    while True:
        try:
            pos = watch.wait(job.id, None, 0.0)
            chunks = job.stream(after)
        except QueueUnavailable:
            yield _event("unavailable", {"status": "unavailable"})
            return
        for chunk in chunks:
            after = chunk.id
            yield _event("chunk", {"text": chunk.text}, chunk.id)
        if pos.version != version:
            version = pos.version
            yield _event("position", payload(pos))
        if pos.status in ENDED and not chunks:
            # the end was read before this last (empty) read: every chunk was sent
            yield _event("end", payload(pos))
            return
        if time.monotonic() >= deadline:
            return
        if not chunks:
            time.sleep(POLL)


@never_cache
@require_GET
def stream_view(request: HttpRequest, token: str) -> HttpResponseBase:
    """The server-sent events of the job ``token`` names (see the module docstring)."""
    target = read_token(token)
    if target is None or not allowed(request, target):
        return not_found()
    after = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    try:
        check_cursor(after)
    except InvalidArgument as exc:
        return JsonResponse({"status": "invalid", "text": str(exc)}, status=400)
    try:
        watch = watch_of(target.queue)
        job = Job(target.tag, get_queue(target.queue).name, "")
    except UnknownQueue:
        return not_found()
    response = StreamingHttpResponse(events(job, watch, after), content_type="text/event-stream")
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
