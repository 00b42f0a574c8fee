"""The admin's words go through Django's translation: every text of its templates is in a
``translate``/``blocktranslate`` tag, and every page rendered under a pseudo-language
(each translated string wrapped in ⟦ ⟧) shows no word outside the marks but the data it
lists (queue names, job ids, task names, consumer names, the user name)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from django_zqueue import get_queue

from .test_admin import BASE, project, superuser  # noqa: F401

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[1] / "django_zqueue" / "templates"
#: attributes a person reads
READ_ATTRS = ("title", "aria-label", "placeholder")


def untranslated(source: str) -> list[str]:
    """The words of a template that are outside any translation tag: its text, and the
    attributes a person reads (a submit button's value too)."""
    s = re.sub(r"{%\s*blocktranslate.*?{%\s*endblocktranslate\s*%}", " ", source, flags=re.S)
    s = re.sub(r"{%\s*translate\s.*?%}", " ", s, flags=re.S)
    s = re.sub(r"{#.*?#}", " ", s, flags=re.S)
    s = re.sub(r"{%\s*block bodyclass\s*%}.*?{%\s*endblock\s*%}", " ", s)  # CSS classes
    s = re.sub(r"{%.*?%}|{{.*?}}", " ", s, flags=re.S)
    s = re.sub(r"<(script|style|code)\b.*?</\1>", " ", s, flags=re.S)
    read = re.findall(rf'\b(?:{"|".join(READ_ATTRS)})="([^"]*)"', s)
    read += re.findall(r'<input type="submit" value="([^"]*)"', s)
    text = re.sub(r"<[^>]*>|&\w+;", " ", s)
    return [w for part in [text, *read] for w in re.findall(r"[A-Za-z]{2,}", part)]


def test_every_text_of_the_templates_is_in_a_translation_tag() -> None:
    found = {
        str(path.relative_to(TEMPLATES)): words
        for path in sorted(TEMPLATES.rglob("*.html"))
        if (words := untranslated(path.read_text()))
    }
    assert found == {}


@pytest.fixture
def pseudo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every string through gettext comes back wrapped in ⟦ ⟧."""
    real = translation._trans  # type: ignore[attr-defined]
    gettext, ngettext = real.gettext, real.ngettext
    pgettext, npgettext = real.pgettext, real.npgettext
    monkeypatch.setattr(real, "gettext", lambda m: f"⟦{gettext(m)}⟧")
    monkeypatch.setattr(real, "ngettext", lambda s, p, n: f"⟦{ngettext(s, p, n)}⟧")
    monkeypatch.setattr(real, "pgettext", lambda c, m: f"⟦{pgettext(c, m)}⟧")
    monkeypatch.setattr(real, "npgettext", lambda c, s, p, n: f"⟦{npgettext(c, s, p, n)}⟧")


def visible_words(html: str, data: set[str]) -> list[str]:
    """The words of a page outside any ⟦ ⟧ mark, the data and the times' zone."""
    body = html.split("<body", 1)[1].split(">", 1)[1]
    body = re.sub(r"&\w+;", " ", body)
    body = re.sub(r"<(script|style|svg|pre|code)\b.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r"<[^>]*>", " ", body)
    while True:
        inner = re.sub(r"⟦[^⟦⟧]*⟧", " ", body)
        if inner == body:
            break
        body = inner
    for datum in sorted(data, key=len, reverse=True):
        body = body.replace(datum, " ")
    body = re.sub(r"\d\d:\d\d:\d\d [A-Z]{2,5}\b", " ", body)
    return re.findall(r"[A-Za-z]{2,}", body)


def test_every_page_shows_only_translated_words_and_data(
    project: dict[str, Any],  # noqa: F811
    superuser: Client,  # noqa: F811
    pseudo: None,
) -> None:
    q = get_queue("default")
    parent = q.publish({"task": "t.parent"}, tag="p1")
    kid = q.publish({"task": "t.kid"}, tag="k1", depends_on=[parent])
    q.publish({"task": "t.later"}, tag="l1", delay=600)
    for i in range(3):
        q.publish({"task": "t.n", "args": [i]}, tag=f"r{i}")
    msgs = q.claim(2, consumer="host:1:w/0")[0]
    q.touch(msgs[0], progress=0.5, note="half")
    q.nack(msgs[1], "RuntimeError: boom", dead=True)
    data = {
        "default", "emails", "reports", "root", "half", "host:1:w/0", "p1", "k1", "l1",
        "r0", "r1", "r2", "t.parent", "t.kid", "t.later", "t.n", "RuntimeError: boom",
        "ZQueue",  # the app's name
    }  # fmt: skip
    pages = [
        BASE,
        f"{BASE}q/default/",
        f"{BASE}q/default/?state=delayed",
        f"{BASE}q/default/?state=waiting",
        f"{BASE}q/default/?state=leased",
        f"{BASE}q/default/?state=dead",
        f"{BASE}q/default/?state=ready&task=t.n",
        f"{BASE}q/default/job/?id={kid}",
        f"{BASE}q/default/job/?id={msgs[0].tag}",
        f"{BASE}q/default/job/?id=r2",
        f"{BASE}q/default/job/?id=nothing",
        f"{BASE}search/?q=nothing",
        f"{BASE}q/default/find/?state=ready&text=t.n",
        f"{BASE}q/default/find/?state=dead&text=nothing",
        f"{BASE}workers/",
    ]
    for url in pages:
        html = superuser.get(url).content.decode()
        assert visible_words(html, data) == [], url
    r = superuser.post(f"{BASE}q/default/do/cancel/", {"tags": ["r0", "r1"]})
    assert visible_words(r.content.decode(), data) == []
    r = superuser.post(f"{BASE}q/default/do/cancel/", {"tags": ["r0"], "confirm": "yes"})
    messages = [str(m) for m in superuser.get(r["Location"]).context["messages"]]
    assert messages and all(m.startswith("⟦") for m in messages)
    r = superuser.post(f"{BASE}q/default/pause/", {"op": "pause"}, follow=True)
    assert visible_words(r.content.decode(), data) == []
    r = superuser.post(f"{BASE}q/default/pause/", {"op": "pause", "confirm": "yes"}, follow=True)
    assert visible_words(r.content.decode(), data) == []
