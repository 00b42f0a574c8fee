"""Settings of a minimal Wagtail site whose background work runs on ZQueueBackend.

INSTALLED_APPS are those of Wagtail's project template (``wagtail start``) that a site
without pages of its own needs; like the template, they do not list ``modelsearch``,
whose tasks Wagtail enqueues all the same. SQLite file: $WAGTAIL_DB.
"""

from __future__ import annotations

import os

SECRET_KEY = "django-zqueue-wagtail-test"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "tests.wagtail_site",  # one page model (LinkPage)
    "wagtail.sites",
    "wagtail.users",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail",
    "modelcluster",
    "taggit",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_zqueue",
]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "tests.wagtail_site.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["WAGTAIL_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
WAGTAIL_SITE_NAME = "zqueue"
WAGTAILADMIN_BASE_URL = "http://localhost"
WAGTAILSEARCH_BACKENDS = {"default": {"BACKEND": "wagtail.search.backends.database"}}

# the one line a Wagtail user adds
TASKS = {"default": {"BACKEND": "django_zqueue.backends.ZQueueBackend"}}
ZQUEUE = {
    "REDIS_URL": os.environ.get("ZQUEUE_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "PREFIX": os.environ["ZQUEUE_PREFIX"],
    "QUEUES": {"default": {}},
}
