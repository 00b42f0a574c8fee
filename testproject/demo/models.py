from __future__ import annotations

import uuid

from django.db import models


class Article(models.Model):
    """An integer-keyed model, sent to tasks by reference."""

    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    views = models.IntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.title


class Token(models.Model):
    """A model with a UUID primary key, so references with non-integer pks are exercised."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    label = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.label
