"""The admin's SVG line charts (the overview's and a queue page's throughput), drawn
server-side: :func:`line_chart` turns per-minute series into a :class:`Chart` the
templates render, with a log axis when one series would flatten the others
(:func:`wants_log`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from ..web import humanize


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    css: str  # class of the SVG element: zq-line-<css>
    points: str  # SVG polyline points, "x,y x,y ..." (every sample)
    dots: list[tuple[str, str]]  # (cx, cy) of each sample
    latest: int | None
    #: (cx, cy, text) of each sample, for the value shown on hover ("14:03 UTC: 47")
    samples: list[tuple[str, str, str]] = field(default_factory=list)
    #: the polylines drawn: runs of consecutive samples, broken where a minute has none
    segments: list[str] = field(default_factory=list)

    @property
    def latest_text(self) -> str:
        """The legend's figure, with the locale's thousands separator."""
        return humanize.count(self.latest)


@dataclass(frozen=True, slots=True)
class Tick:
    y: str
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG line chart, every coordinate already formatted (no localisation in templates)."""

    title: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    lines: list[Line]
    ticks: list[Tick]
    xticks: list[tuple[str, str]]  # (x, label)
    empty: bool
    latest_note: str  # what the figures in the legend are
    log: bool = False  # a logarithmic y axis (0, 1, 10, 100, ...)
    span: str = ""  # the window it shows, in words ("the last hour")


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5 x 10^k that is >= value (at least 1)."""
    if value <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * exp >= value:
            return int(step * exp)
    return int(10 * exp)  # pragma: no cover - unreachable


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def _xticks(
    n: int, left: int, right: int, axis: Sequence[tuple[int, str]] | None = None
) -> list[tuple[str, str]]:
    """(x, label) of the time axis of ``n`` samples: ``axis``' (samples back from now,
    label), by default every 15 minutes back from now (a sample a minute)."""
    if axis is None:
        axis = [
            (b, _("now") if b == 0 else _("-%(n)s min") % {"n": b}) for b in (60, 45, 30, 15, 0)
        ]
    out = []
    for back, label in axis:
        if back < n:
            i = n - 1 - back
            out.append((_fmt(left + (right - left) * (i / max(1, n - 1))), label))
    return out


#: a chart switches to a log axis when its peak is at least this many times the peak of
#: its smallest non-empty series (a burst of enqueues would flatten the acks to zero)
LOG_RATIO = 20


def wants_log(series: Sequence[tuple[str, str, Sequence[int | None]]]) -> bool:
    """Whether a log axis shows ``series`` better: one series' peak dwarfs another's."""
    peaks = [max((v for v in vs if v), default=0) for _, _, vs in series]
    shown = [p for p in peaks if p > 0]
    return len(shown) > 1 and max(shown) >= 100 and max(shown) >= LOG_RATIO * min(shown)


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plot area of a chart of ``n`` minutes and its y axis up to ``ymax``, linear
    or logarithmic: where a sample is drawn."""

    left: int
    right: int
    top: int
    bottom: int
    n: int
    ymax: int
    log: bool

    def share(self, v: float) -> float:
        """How high ``v`` stands on the y axis, 0 (bottom) to 1 (top)."""
        if self.log:
            return math.log10(1 + v) / math.log10(1 + self.ymax)
        return v / self.ymax

    def y(self, v: float) -> str:
        return _fmt(self.bottom - (self.bottom - self.top) * self.share(v))

    def xy(self, i: int, v: int) -> tuple[str, str]:
        return _fmt(self.left + (self.right - self.left) * (i / max(1, self.n - 1))), self.y(v)


def _frame(width: int, height: int, n: int, peak: int, log: bool) -> _Frame:
    """The plot area inside the margins, the y axis up to a round value above ``peak``
    (a power of ten on a log axis)."""
    ymax = 10 ** max(1, math.ceil(math.log10(max(peak, 1)))) if log else nice_ceiling(peak)
    return _Frame(left=48, right=width - 8, top=8, bottom=height - 20, n=n, ymax=ymax, log=log)


def _yticks(frame: _Frame) -> list[Tick]:
    """The y axis' marks: 0, half and top on a linear axis (0 and 1 when the top is 1);
    0 and at most four powers of ten on a log axis, the top among them."""
    if frame.log:
        powers = [0, *(10**k for k in range(round(math.log10(frame.ymax)) + 1))]
        step = max(1, math.ceil((len(powers) - 1) / 4))
        marks = [powers[0], *powers[1::step]]
        if marks[-1] != frame.ymax:
            marks.append(frame.ymax)
        return [Tick(y=frame.y(v), label=humanize.count(v)) for v in marks]
    ticks = [
        Tick(y=frame.y(frame.ymax * f), label=humanize.count(int(frame.ymax * f)))
        for f in (0, 0.5, 1)
    ]
    return [ticks[0], ticks[2]] if frame.ymax == 1 else ticks


def _when(i: int, n: int, labels: Sequence[str] | None) -> str:
    """The minute of sample ``i``: its label when given, else how long before now."""
    if labels is not None and i < len(labels):
        return labels[i]
    back = n - 1 - i
    return _("now") if back == 0 else _("-%(n)s min") % {"n": back}


def _line(
    frame: _Frame,
    name: str,
    css: str,
    values: Sequence[int | None],
    *,
    dots: bool,
    latest_index: int,
    labels: Sequence[str] | None,
) -> Line:
    """One series as a polyline, its samples with their hover text, and the legend's
    value at ``latest_index`` (or the last sample before it)."""
    pts = [frame.xy(i, v) for i, v in enumerate(values) if v is not None]
    runs: list[list[tuple[str, str]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(frame.xy(i, v))
    present = [v for v in list(values)[: latest_index + 1 or None] if v is not None]
    texts = [
        _("%(when)s: %(name)s %(value)s")
        % {"when": _when(i, frame.n, labels), "name": name, "value": humanize.count(v)}
        for i, v in enumerate(values)
        if v is not None
    ]
    return Line(
        name=name,
        css=css,
        points=" ".join(f"{x},{y}" for x, y in pts),
        dots=pts if dots else [],
        latest=present[-1] if present else None,
        samples=[(x, y, t) for (x, y), t in zip(pts, texts, strict=True)],
        segments=[" ".join(f"{x},{y}" for x, y in run) for run in runs if run],
    )


def line_chart(
    title: str,
    series: Sequence[tuple[str, str, Sequence[int | None]]],
    *,
    dots: bool = False,
    latest_index: int = -1,
    latest_note: str | None = None,
    width: int = 600,
    height: int = 150,
    labels: Sequence[str] | None = None,
    log: bool | None = None,
    axis: Sequence[tuple[int, str]] | None = None,
    span: str | None = None,
) -> Chart:
    """Polylines for ``series`` of (name, css class, values), one value per minute; a
    None value is a gap: no sample that minute, the line broken there, never a zero.
    The legend shows each series' value at ``latest_index`` (or the last sample before
    it). Each sample has its value for hovering, after its ``labels`` entry (the minute)
    when given. The y axis is logarithmic with ``log``; None chooses it (:func:`wants_log`).
    ``axis`` marks the time axis ((samples back from now, label), default every 15
    minutes) and ``span`` names the window (default "the last hour")."""
    n = max((len(v) for _, _, v in series), default=0)
    peak = max((x for _, _, vs in series for x in vs if x is not None), default=0)
    frame = _frame(width, height, n, peak, wants_log(series) if log is None else log)
    lines = [
        _line(frame, name, css, values, dots=dots, latest_index=latest_index, labels=labels)
        for name, css, values in series
    ]
    return Chart(
        title=title,
        width=width,
        height=height,
        left=frame.left,
        right=frame.right,
        top=frame.top,
        bottom=frame.bottom,
        lines=lines,
        ticks=_yticks(frame),
        xticks=_xticks(n, frame.left, frame.right, axis),
        empty=peak == 0,
        latest_note=_("now") if latest_note is None else latest_note,
        log=frame.log,
        span=_("the last hour") if span is None else span,
    )
