"""System checks for ``settings.ZQUEUE`` (ids ``django_zqueue.E001`` ...).

``manage.py check`` reports every problem at once, each with a hint. These checks read
settings only; they never connect to Redis.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from . import conf


@checks.register("django_zqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [checks.Error(p.msg, hint=p.hint, id=p.id) for p in conf.problems()]
