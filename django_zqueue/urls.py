"""URLs a site includes for its users: ``path("zqueue/", include("django_zqueue.urls"))``.

``position/<token>/``: a job's position in line (:mod:`django_zqueue.web.position`), named
``django_zqueue:position``; :meth:`Job.position_url <django_zqueue.tasks.job.Job.position_url>`
builds it. ``stream/<token>/``: the job's streamed output and position as server-sent
events (:mod:`django_zqueue.web.stream`), named ``django_zqueue:stream``, the same token.
"""

from django.urls import path

from .web.position import position_view
from .web.stream import stream_view

app_name = "django_zqueue"

urlpatterns = [
    path("position/<str:token>/", position_view, name="position"),
    path("stream/<str:token>/", stream_view, name="stream"),
]
