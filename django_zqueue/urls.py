"""URLs a site includes for its users: ``path("zqueue/", include("django_zqueue.urls"))``.

``position/<token>/``: a job's position in line (:mod:`django_zqueue.web.position`), named
``django_zqueue:position``; :meth:`Job.position_url <django_zqueue.tasks.job.Job.position_url>`
builds it.
"""

from django.urls import path

from .web.position import position_view

app_name = "django_zqueue"

urlpatterns = [path("position/<str:token>/", position_view, name="position")]
