"""Checks an enqueued call against the task function's signature, at the caller.

Without it, ``add.enqueue(1, 2, 3)`` for ``def add(a, b)`` would be accepted, fail in the
worker with a ``TypeError``, be retried with backoff and end as a dead letter. The
signature is read once per function (``inspect.signature`` is slow); a call with
positional arguments only is checked by counting them, any other with
``Signature.bind`` (a few microseconds).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class _Shape:
    signature: inspect.Signature
    text: str  # the parameters without annotations, e.g. "(a, b=2)"
    #: a call with only positional arguments binds when their number is in [low, high]
    #: (high None: *args); low is None when a keyword-only parameter is required
    low: int | None
    high: int | None
    #: the parameters' names (None: any keyword is taken, by **kwargs); a keyword argument
    #: of another name is unknown (a positional-only one passed by keyword is bind's to say)
    keywords: frozenset[str] | None


@functools.cache
def _shape(func: Callable[..., Any]) -> _Shape | None:
    """What a call of ``func`` needs; None when its signature cannot be read (some
    builtins), and then calls are not checked."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required_kw = any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in params)
    bare = sig.replace(
        parameters=[p.replace(annotation=p.empty) for p in params],
        return_annotation=sig.empty,
    )
    return _Shape(
        signature=sig,
        text=str(bare),
        low=None if required_kw else sum(p.default is p.empty for p in positional),
        high=None if any(p.kind == p.VAR_POSITIONAL for p in params) else len(positional),
        keywords=None
        if any(p.kind == p.VAR_KEYWORD for p in params)
        else frozenset(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)),
    )


def signature_text(func: Callable[..., Any]) -> str:
    """The parameters of ``func`` without annotations, e.g. ``"(a, b=2)"`` ("(...)" when
    its signature cannot be read)."""
    shape = _shape(func)
    return shape.text if shape is not None else "(...)"


def misfit(
    name: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> str | None:
    """In the worker: why a job's arguments cannot be passed to its task (a ``TypeError``
    a rerun cannot help), or None when they bind."""
    problem = bind_problem(func, args, kwargs)
    if problem is None:
        return None
    return (
        f"arguments do not fit {name}{signature_text(func)}: {problem} (permanent: a rerun "
        "would fail the same way)"
    )


def bind_problem(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> str | None:
    """None when ``func(*args, **kwargs)`` binds (or its signature cannot be read); else
    what is wrong, as ``Signature.bind`` says it, naming every unknown keyword argument
    (``bind`` names only the first problem it meets: a missing argument hides them)."""
    shape = _shape(func)
    if shape is None:
        return None
    n = len(args)
    if (
        not kwargs
        and shape.low is not None
        and shape.low <= n
        and (shape.high is None or n <= shape.high)
    ):
        return None  # the common case, without the cost of Signature.bind
    try:
        shape.signature.bind(*args, **kwargs)
    except TypeError as exc:
        problem = str(exc)
    else:
        return None
    unknown = [k for k in kwargs if shape.keywords is not None and k not in shape.keywords]
    if not unknown:
        return problem
    named = (
        f"got an unexpected keyword argument {unknown[0]!r}"
        if len(unknown) == 1
        else "got unexpected keyword arguments " + ", ".join(repr(k) for k in unknown)
    )
    if "unexpected keyword argument" in problem:
        return named
    return f"{problem}; {named}"


def check_call(
    name: str,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    index: int | None = None,
) -> None:
    """``TypeError`` naming the task when ``func(*args, **kwargs)`` could not bind.

    ``index``: the position of the call in an ``enqueue_many``, for the message."""
    problem = bind_problem(func, args, kwargs)
    if problem is not None:
        where = f"call {index} of enqueue_many: " if index is not None else ""
        raise TypeError(f"{where}{name}{signature_text(func)}: {problem} (nothing was enqueued)")
