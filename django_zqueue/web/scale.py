"""The autoscaling signal as JSON, for KEDA's ``metrics-api`` scaler or any autoscaler
(docs/deploying.md): :func:`scale_view` makes the view a project mounts::

    from django_zqueue.web.scale import scale_view

    path("zqueue/scale/", scale_view(token=env("ZQUEUE_SCALE_TOKEN")))

A request is let in with ``Authorization: Bearer <token>`` (KEDA's ``authMode: bearer``)
when a token is given, or from a logged-in user with ``permission`` (``view_queue`` by
default); anyone else gets 403. The query may set ``target_seconds``,
``threads_per_worker`` and ``queues`` (comma-separated, default: every configured queue);
the answer is :func:`~django_zqueue.read.scale_document`'s, or 400 for a bad query and
503 while Redis is unreachable, each with an ``error`` line.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .. import conf
from ..exceptions import InvalidArgument, QueueUnavailable
from ..queue import get_queue
from ..read.scale import DEFAULT_TARGET_SECONDS, scale_document

View = Callable[[HttpRequest], HttpResponse]


def scale_view(
    token: str | None = None, permission: str | None = "django_zqueue.view_queue"
) -> View:
    """A view of the scale document, let in by bearer ``token`` (when not None; at least
    16 characters) or for a user with ``permission`` (None: no user is let in)."""
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise ValueError("the scale view's token must be a string of 16 characters or more")
    if token is None and permission is None:
        raise ValueError("give the scale view a token, a permission, or both")
    expected = None if token is None else f"Bearer {token}".encode()

    def allowed(request: HttpRequest) -> bool:
        sent = request.headers.get("Authorization", "")
        if expected is not None and hmac.compare_digest(sent.encode(), expected):
            return True
        user = getattr(request, "user", None)
        return bool(
            permission is not None
            and user is not None
            and user.is_authenticated
            and user.has_perm(permission)
        )

    @never_cache
    @require_GET
    def view(request: HttpRequest) -> HttpResponse:
        if not allowed(request):
            return JsonResponse({"error": "forbidden"}, status=403)
        try:
            target, per_worker, names = _query(request)
            doc = scale_document([get_queue(n).engine for n in names], target, per_worker)
        except InvalidArgument as exc:
            return JsonResponse({"error": str(exc)}, status=400)
        except QueueUnavailable as exc:
            return JsonResponse({"error": f"redis unreachable: {exc}"[:300]}, status=503)
        return JsonResponse(doc)

    return view


def _query(request: HttpRequest) -> tuple[float, int, list[str]]:
    """``target_seconds``, ``threads_per_worker`` and the queue names of the query
    (InvalidArgument for a bad one)."""
    try:
        target = float(request.GET.get("target_seconds", DEFAULT_TARGET_SECONDS))
        per_worker = int(request.GET.get("threads_per_worker", "1"))
    except ValueError:
        raise InvalidArgument("target_seconds and threads_per_worker must be numbers") from None
    configured = conf.get_config().queues
    raw = request.GET.get("queues")
    names = [n.strip() for n in raw.split(",") if n.strip()] if raw else list(configured)
    unknown = [n for n in names if n not in configured]
    if unknown or not names:
        raise InvalidArgument(f"unknown queue(s) {unknown}; configured: {sorted(configured)}")
    return target, per_worker, names
