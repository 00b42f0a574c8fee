"""A page for a site's users: start a slow job, then watch its place in line."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from django_zqueue.tasks.task import Job

from . import tasks


def wait_page(request: HttpRequest) -> HttpResponse:
    """POST: enqueue a job and remember it in the session; GET: show its position."""
    if request.method == "POST":
        job = tasks.sleep.enqueue(1.0)
        request.session["zq_job"] = [job.queue_name, job.id]
        return HttpResponseRedirect(reverse("demo-wait"))
    saved = request.session.get("zq_job")
    job = Job(id=saved[1], queue_name=saved[0]) if saved else None
    return render(request, "demo/wait.html", {"job": job})
