"""Accessibility and width of the admin pages in a real headless Chromium: axe-core
(https://github.com/dequelabs/axe-core) finds no serious or critical violation on the
overview, a queue's Ready, Dead letters and Finished tabs, a job page and the Workers page,
in the light and the dark theme; and at 390 px wide no page scrolls sideways.

axe-core comes from npm (``npm install --prefix <dir> axe-core@4``, done by ``.ci/run``
into ``.ci/work/node``; ``$ZQ_NODE_PREFIX`` names another folder, ``$ZQ_AXE`` the file
``axe.min.js`` itself). Without it the axe test skips, saying so, unless
``ZQUEUE_REQUIRE_BROWSER=1``: then it fails."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import redis

from django_zqueue import get_queue

pytest.importorskip("selenium")
from selenium.webdriver.remote.webdriver import WebDriver

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    REQUIRED,
    ROOT,
    admin_login,
    browser,
    demo_data,
    project,
)
from .test_admin_browser import pytestmark as pytestmark
from .test_admin_finished_browser import history

#: where ``npm install --prefix <it> axe-core@4`` put the npm module (.ci/run's default)
NODE_PREFIX = Path(os.environ.get("ZQ_NODE_PREFIX", ROOT / ".ci" / "work" / "node"))
AXE = Path(os.environ.get("ZQ_AXE", NODE_PREFIX / "node_modules" / "axe-core" / "axe.min.js"))
#: the impacts that fail the test, of axe's four (minor, moderate, serious, critical);
#: ``ZQ_AXE_IMPACTS=minor,moderate,serious,critical`` lists every violation
FAILING = tuple(os.environ.get("ZQ_AXE_IMPACTS", "serious,critical").split(","))

#: runs axe on the whole document and calls back with the failing violations, each with
#: the first few elements it names (their CSS selector and axe's summary)
AXE_RUN_JS = """
var done = arguments[arguments.length - 1], failing = arguments[0];
axe.run(document, {resultTypes: ['violations']}).then(function (r) {
  done(r.violations.filter(function (v) { return failing.indexOf(v.impact) >= 0; })
    .map(function (v) {
      return {id: v.id, impact: v.impact, help: v.help,
              nodes: v.nodes.slice(0, 4).map(function (n) {
                return n.target.join(' ') + ' :: ' + (n.failureSummary || '').slice(0, 300);
              }), count: v.nodes.length};
    }));
}, function (e) { done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]); });
"""

WIDTH_JS = """
var d = document.documentElement;
var wide = Array.prototype.filter.call(document.querySelectorAll('body *'), function (e) {
  var r = e.getBoundingClientRect();
  return r.width > 0 && r.right > window.innerWidth + 1 && !e.closest('.results, .zq-scroll');
}).slice(0, 5).map(function (e) { return e.tagName + '.' + e.className + '#' + e.id; });
return {scroll: d.scrollWidth, inner: window.innerWidth, wide: wide};
"""


def pages(redis_client: redis.Redis) -> dict[str, str]:
    """Demo data on three queues with a history of finished jobs; the page URLs to check."""
    emails = get_queue("emails")
    history(emails)  # first: it claims the jobs it publishes
    demo_data(redis_client)
    get_queue("default").engine.stats.roll_up()  # the 24-hour and 7-day rings
    default = get_queue("default")
    tag = default.read.listing("ready", 1, 1).jobs[0].tag
    dead = emails.read.listing("dead", 1, 1).jobs[0].tag
    running = default.read.listing("leased", 1, 1).jobs[0].tag  # with its progress
    kid = default.publish({"task": "t.kid"}, depends_on=[tag])  # a workflow's tables
    return {
        "overview": BASE,
        "ready": f"{BASE}q/default/",
        "ready, 7 days": f"{BASE}q/default/?range=7d",
        "dead letters": f"{BASE}q/emails/?state=dead",
        "finished": f"{BASE}q/emails/?state=finished",
        "job": f"{BASE}q/default/job/?id={tag}",
        "dead job": f"{BASE}q/emails/job/?id={dead}",
        "workers": f"{BASE}workers/",
        "delayed": f"{BASE}q/default/?state=delayed",
        "in flight": f"{BASE}q/default/?state=leased",
        "search": f"{BASE}search/?q=send_receipt",
        "schedules": f"{BASE}schedules/",
        "waiting": f"{BASE}q/default/?state=waiting",
        "running job": f"{BASE}q/default/job/?id={running}",
        "waiting job": f"{BASE}q/default/job/?id={kid}",
        "arguments contain": f"{BASE}q/default/find/?text=batch",
    }


def describe(found: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for where, violations in found.items():
        for v in violations:
            lines.append(f"{where}: [{v['impact']}] {v['id']} ({v['count']}x): {v['help']}")
            lines.extend(f"    {n}" for n in v["nodes"])
    return "\n".join(lines)


def test_axe_finds_no_serious_or_critical_violation(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    if not AXE.is_file():
        missing = f"axe-core is not installed ({AXE} is missing: npm install axe-core@4)"
        if REQUIRED:
            pytest.fail(f"ZQUEUE_REQUIRE_BROWSER=1 but {missing}; .ci/run installs it")
        pytest.skip(missing)
    source = AXE.read_text(encoding="utf-8")
    urls = pages(redis_client)
    browser.set_script_timeout(60)
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        for theme in ("light", "dark"):
            browser.get(f"{admin_login}{BASE}")
            browser.execute_script("localStorage.setItem('theme', arguments[0])", theme)
            for name, url in urls.items():
                browser.get(f"{admin_login}{url}")
                shown = browser.execute_script("return document.documentElement.dataset.theme")
                assert shown == theme, (name, shown)
                browser.execute_script(source)
                violations = browser.execute_async_script(AXE_RUN_JS, list(FAILING))
                if violations:
                    found[f"{name} ({theme})"] = violations
    finally:
        browser.get(f"{admin_login}{BASE}")
        browser.execute_script("localStorage.removeItem('theme')")
    assert not found, "axe found serious or critical violations:\n" + describe(found)


def test_no_page_scrolls_sideways_at_390_px(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    urls = pages(redis_client)
    browser.set_window_size(390, 844)
    wide: dict[str, Any] = {}
    try:
        assert browser.execute_script("return window.innerWidth") <= 390
        for name, url in urls.items():
            browser.get(f"{admin_login}{url}")
            got = browser.execute_script(WIDTH_JS)
            if got["scroll"] > got["inner"]:
                wide[name] = got
    finally:
        browser.set_window_size(1280, 900)
    assert not wide, wide
