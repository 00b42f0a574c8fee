"""Colours of the admin pages computed from the CSS, for contrast tests: the rules of
django_zqueue's dashboard.css, the admin's CSS variables (light and dark, from Django's
own base.css and dark_mode.css), and the WCAG 2 contrast ratio of two colours."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import django

ADMIN_CSS = Path(django.__file__).parent / "contrib" / "admin" / "static" / "admin" / "css"
DASHBOARD_CSS = (
    Path(__file__).resolve().parents[1]
    / "django_zqueue"
    / "static"
    / "django_zqueue"
    / "dashboard.css"
)


def _blocks(css: str) -> list[tuple[str, str]]:
    """(selector, declarations) of every rule, at any depth of ``@media`` nesting."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    out: list[tuple[str, str]] = []
    i, start, depth, stack = 0, 0, 0, []
    while i < len(css):
        ch = css[i]
        if ch == "{":
            stack.append(css[start:i].strip())
            depth += 1
            start = i + 1
        elif ch == "}":
            selector = stack.pop() if stack else ""
            body = css[start:i]
            if "{" not in body and not selector.startswith("@"):
                out.append((selector, body))
            depth -= 1
            start = i + 1
        i += 1
    return out


def _declarations(body: str) -> dict[str, str]:
    out = {}
    for part in body.split(";"):
        if ":" in part:
            name, value = part.split(":", 1)
            out[name.strip()] = value.strip()
    return out


@cache
def _rules(path: Path) -> list[tuple[list[str], dict[str, str]]]:
    return [
        ([s.strip() for s in selector.split(",")], _declarations(body))
        for selector, body in _blocks(path.read_text())
    ]


def rules(selector: str, path: Path = DASHBOARD_CSS) -> dict[str, str]:
    """The declarations of every rule of ``path`` listing ``selector`` (later ones win)."""
    out: dict[str, str] = {}
    for selectors, decls in _rules(path):
        if selector in selectors:
            out.update(decls)
    return out


@cache
def variables(theme: str) -> dict[str, str]:
    """The CSS variables in effect in ``theme`` ("light" or "dark"): the admin's, then
    the dashboard's, each file's light ``:root``, then its ``html[data-theme=...]``."""
    out: dict[str, str] = {}
    for path in (ADMIN_CSS / "base.css", ADMIN_CSS / "dark_mode.css", DASHBOARD_CSS):
        for selectors, decls in _rules(path):
            themed = f'html[data-theme="{theme}"]'
            if (":root" in selectors and path.name != "dark_mode.css") or themed in selectors:
                out.update({k: v for k, v in decls.items() if k.startswith("--")})
    return out


def resolve(value: str, theme: str) -> str:
    """``value`` with every ``var(--name)`` replaced by the variable's value in ``theme``."""
    names = variables(theme)
    for _ in range(10):
        m = re.search(r"var\((--[\w-]+)\)", value)
        if m is None:
            return value.strip()
        value = value.replace(m.group(0), names[m.group(1)])
    raise AssertionError(f"variables nest too deep in {value!r}")


def rgb(colour: str) -> tuple[int, int, int]:
    colour = colour.strip().lower()
    if m := re.fullmatch(r"#([0-9a-f]{3}|[0-9a-f]{6})", colour):
        h = m.group(1)
        if len(h) == 3:
            h = "".join(c * 2 for c in h)
        return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
    if m := re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*1)?\)", colour):
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    named = {"white": (255, 255, 255), "black": (0, 0, 0)}
    if colour in named:
        return named[colour]
    raise ValueError(f"not an opaque colour: {colour!r}")


def luminance(colour: str) -> float:
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """The WCAG 2 contrast ratio of two colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
