"""The tasks, views and urls of tests/test_testing_*.py (django_zqueue.testing)."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_zqueue import durable, task

#: what the tasks did, in order (cleared by each test)
LOG: list[Any] = []
#: failures left to raise, by key (flaky)
LEFT: dict[str, int] = {}


@task
def send_welcome(user_id: int) -> None:
    user = User.objects.get(pk=user_id)
    mail.send_mail("Welcome", f"Hello {user.username}", "app@example.com", [user.email])
    LOG.append(("welcome", user_id))


@task
def greet(user: User) -> None:
    LOG.append(("greet", user.username))


@task
def add(a: int, b: int) -> int:
    LOG.append(("add", a, b))
    return a + b


@task(queue="emails")
def notify(to: str, *, subject: str = "") -> None:
    LOG.append(("notify", to, subject))


@task
def boom(message: str = "boom") -> None:
    raise ValueError(message)


def remember_failure(job: Any, exc: BaseException) -> None:
    LOG.append(("on_failure", type(exc).__name__))


@task(max_retries=0, on_failure=remember_failure)
def doomed() -> None:
    raise KeyError("doomed")


@task(max_retries=3, retry_backoff={"base": 3600, "max": 3600})
def flaky(key: str) -> str:
    if LEFT.get(key, 0) > 0:
        LEFT[key] -= 1
        raise ConnectionError(f"flaky {key}")
    LOG.append(("flaky", key))
    return key


@task
def fan_out(n: int) -> None:
    for i in range(n):
        add.enqueue(i, i)


@task
def countdown(n: int) -> None:
    LOG.append(("countdown", n))
    if n > 0:
        countdown.enqueue(n - 1)


@task
def forever() -> None:
    forever.enqueue()


@task
def first(x: int) -> int:
    LOG.append(("first", x))
    return x + 1


@task
def sleepy(x: int) -> int:
    durable.sleep("nap", 3600)
    LOG.append(("sleepy", x))
    return x * 10


@task
def last(x: int) -> int:
    LOG.append(("last", x))
    return x


@task
def stepped(x: int) -> None:
    value = durable.step("once", lambda: LOG.append(("step", x)) or x)
    durable.sleep("nap", 7200)
    LOG.append(("after", value))


@task
def approval(order: int) -> None:
    answer = durable.wait_for("approved", timeout=86400)
    LOG.append(("approved", order, answer))


def signup(request: HttpRequest) -> HttpResponse:
    with transaction.atomic():
        user = User.objects.create_user(
            request.POST["username"], email=request.POST["email"], password="x"
        )
        send_welcome.enqueue(user.pk)
    return HttpResponse(str(user.pk), status=201)


def signup_rolled_back(request: HttpRequest) -> HttpResponse:
    try:
        with transaction.atomic():
            user = User.objects.create_user(request.POST["username"], password="x")
            send_welcome.enqueue(user.pk)
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    return HttpResponse("no", status=400)


urlpatterns = [
    path("signup/", signup),
    path("signup-rollback/", signup_rolled_back),
]


@task
async def async_double(x: int) -> int:
    LOG.append(("async", x * 2))
    return x * 2


@task(timeout=0.2, max_retries=0)
def overruns() -> None:
    for _ in range(200):  # 10 s at most: interrupted at its 0.2 s timeout when asked
        time.sleep(0.05)
    LOG.append(("overran",))


@task(timeout=0.05, max_retries=0)
def overruns_briefly() -> None:
    for _ in range(6):  # 0.3 s: past its timeout
        time.sleep(0.05)
    LOG.append(("overran",))
