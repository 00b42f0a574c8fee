from __future__ import annotations

from django.db import models
from wagtail.models import Page


class LinkPage(Page):
    """A page that refers to another: its reference index row is Wagtail's task's work."""

    related = models.ForeignKey(
        "wagtailcore.Page", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
