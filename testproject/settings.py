"""Settings of the demo/test project. The environment is read with django-environ.

ZQUEUE_REDIS_URL   Redis for the queues (default redis://127.0.0.1:6379/0)
ZQUEUE_PREFIX      key prefix (default "zq")
DATABASE_URL       default database (default: SQLite file next to this one)
"""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent
env = environ.Env(DEBUG=(bool, True))

SECRET_KEY = env("DJANGO_SECRET_KEY", default="django-zqueue-insecure-test-key")
DEBUG = env("DEBUG")
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_zqueue",
    "testproject.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "testproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"

TASKS = {
    "default": {
        "BACKEND": "django_zqueue.backends.ZQueueBackend",
        "QUEUES": ["default", "emails", "reports"],
        "OPTIONS": {"RESULT_TTL": 3600},
    }
}

try:  # Django 5.2: Django's Tasks framework comes from the django-tasks backport
    import django.tasks  # noqa: F401
except ImportError:
    try:
        import django_tasks  # noqa: F401

        INSTALLED_APPS.append("django_tasks")
    except ImportError:
        pass

ZQUEUE = {
    "REDIS_URL": env("ZQUEUE_REDIS_URL", default="redis://127.0.0.1:6379/0"),
    "PREFIX": env("ZQUEUE_PREFIX", default="zq"),
    "QUEUES": {
        "default": {},
        "emails": {"max_retries": 5, "retry_backoff": {"base": 2, "max": 600, "jitter": 0.2}},
        "reports": {"visibility_timeout": 600, "concurrency": 4, "priority_mode": "aging"},
    },
}

# The suite's tests name their key prefixes themselves (tests/conftest.py): no automatic
# test prefix (django_zqueue.conf.testenv, docs/testing.md)
ZQUEUE_TEST_PREFIX = False
