"""The Lua the scripts send: one script with its helpers (for ``EVALSHA``), or every
script as one Redis Functions library (for ``FCALL``).

Each ``lua/<name>.lua`` file holds one atomic operation and starts with its contract
(KEYS, ARGV, return value). Helpers live in ``lua/_<helper>.lua`` (no key access of
their own); a script names the ones it calls with ``--@include <helper>`` lines.

- :func:`source`: the script alone, for ``EVAL``/``EVALSHA``: a ``#!lua`` line with its
  flags (those its function has in the library), the helpers it includes (and what they
  include in turn), once each, dependencies first, then the operation. Redis compiles
  the helpers again at every call.
- :func:`library`: every script as a function of one library (Redis 7.0+ ``FUNCTION
  LOAD``). The helpers are defined once, when the library loads, and every function
  closes over them; a script's text becomes the body of ``function(KEYS, ARGV) ... end``,
  so it reads its keys and arguments as it does under ``EVALSHA``. Helpers therefore
  hold no state between calls: their top-level locals are constants
  (``tests/test_functions.py`` checks it).

The library's name and its functions' names carry a hash of its text
(``zqueue_<hash>``, ``zq_<hash>_<script>``): two releases of the package load two
libraries side by side, and each process calls only its own, whatever the other loaded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

#: ``--@include <helper>``: the script (or helper) calls something ``lua/_<helper>.lua`` defines
INCLUDE_RE = re.compile(r"^--@include (\w+)[ \t]*$", re.MULTILINE)

#: the name every library of this package starts with (``zqueue_<hash>``)
LIBRARY_PREFIX = "zqueue_"

#: scripts that write nothing: flagged ``no-writes`` and called with ``FCALL_RO`` (a
#: replica may answer them; Redis refuses a write from them)
READ_ONLY = frozenset({"info", "positions", "range_after", "search", "state", "rank_key"})

#: scripts that free memory, or move a job along without adding one, in a bounded
#: step: flagged ``allow-oom``, so that workers drain a server at ``maxmemory``
#: (docs/operations.md, "Redis configuration", says why each is safe there). Every other
#: writing script is refused whole at ``maxmemory`` (an ``OOM`` reply before it runs,
#: nothing written). As a Functions library the flag is the function's; under ``EVAL``
#: (a Redis Cluster, ``LUA_FUNCTIONS`` False) it is in the ``#!lua flags=allow-oom``
#: first line of the script's source (:func:`source`).
ALLOW_OOM = frozenset(
    {
        "ack",
        "ack_many",
        "nack",
        "release",
        "touch",
        "delete",
        "purge_dead",
        "cancel",
        "wf_clear",
        "claim",
        "claim_fair",
        "scan",
    }
)


def lua_file(name: str) -> str:
    """The text of ``lua/<name>.lua`` (a helper's name starts with ``_``)."""
    return (resources.files("django_zqueue.engine") / "lua" / f"{name}.lua").read_text(
        encoding="utf-8"
    )


#: a script's ``key_roles(KEYS, {'ready', 'delayed', ...})`` (``lua/_keys.lua``)
ROLES_RE = re.compile(r"key_roles\(KEYS, \{([^{}]*)\}\)")
ROLE_NAME_RE = re.compile(r"'(\w+)'")


def _built_roles(match: re.Match[str]) -> str:
    roles = ROLE_NAME_RE.findall(match.group(1))
    table = ", ".join(f"{role} = KEYS[{i}]" for i, role in enumerate(roles, 1))
    return f"key_roles_built(KEYS, {len(roles)}, {{{table}}}, '{', '.join(roles)}')"


@cache
def script_text(name: str) -> str:
    """The text of script ``name`` as the server runs it: ``lua/<name>.lua`` with its
    ``key_roles(KEYS, {...})`` built here, once, into the table it makes (``{ready =
    KEYS[1], ...}``, checked by ``key_roles_built`` for the count of its KEYS): the role
    list is read when the library is built, not at every call."""
    return ROLES_RE.sub(_built_roles, lua_file(name))


def includes(name: str) -> list[str]:
    """The helpers ``lua/<name>.lua`` names in its ``--@include`` lines, in order."""
    return INCLUDE_RE.findall(lua_file(name))


def helper_order(names: Iterable[str]) -> list[str]:
    """The helpers the scripts ``names`` include (and theirs), each once, each after the
    helpers it uses."""
    order: list[str] = []

    def visit(helper: str, path: tuple[str, ...]) -> None:
        if helper in path:
            raise ValueError(f"lua include cycle: {' -> '.join((*path, helper))}")
        if helper not in order:
            for inner in includes(f"_{helper}"):
                visit(inner, (*path, helper))
            order.append(helper)

    for name in names:
        for helper in includes(name):
            visit(helper, (name,))
    return order


def sha1(text: str) -> str:
    """The SHA1 of a script's text: the name ``EVALSHA`` calls it by."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


@cache
def source(name: str) -> str:
    """The full source sent to Redis for script ``name`` (``EVAL``): a ``#!lua`` line with
    its flags (:func:`flags`), the helpers it includes (and theirs), each once, each after
    the helpers it uses, then the operation.

    The ``#!lua`` line makes Redis run the script as it runs the same function of the
    library: with the same flags, so a script that may grow memory is refused whole at
    ``maxmemory`` and one of :data:`ALLOW_OOM` runs there. Without it Redis runs an
    ``EVAL`` script in its compatibility mode, where a script's first write that may grow
    memory fails at ``maxmemory`` unless it wrote before: a ``claim`` refused, a
    ``set_priority`` let through, by the order of their commands."""
    named = flags(name)
    head = "#!lua flags=" + ",".join(named) if named else "#!lua"
    helpers = (lua_file(f"_{h}") for h in helper_order([name]))
    return "\n".join([head, *helpers, script_text(name)])


@cache
def policy_fields(name: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Of the policy fields ``names``, those script ``name`` reads: each one its source
    (with its helpers) names as a field (``policy.mode``, ``p.keep_finished``), in the
    order of ``names``. A field its source does not name is not sent to it, and one the
    script reads but was not sent raises (``lua/_policy.lua``), so a test of the script
    finds a field this misses."""
    text = source(name)
    return tuple(n for n in names if re.search(rf"\.{n}\b", text))


def flags(name: str) -> tuple[str, ...]:
    """The Functions flags of script ``name``."""
    if name in READ_ONLY:
        return ("no-writes",)
    if name in ALLOW_OOM:
        return ("allow-oom",)
    return ()


@dataclass(frozen=True)
class Library:
    """A Functions library: its ``name``, the ``code`` that ``FUNCTION LOAD`` takes, and
    the function each script is (``functions[script]``)."""

    name: str
    code: str
    functions: dict[str, str]


def _register(function: str, script: str) -> str:
    quoted = ", ".join(f"'{f}'" for f in flags(script))
    return (
        f"redis.register_function{{function_name = '{function}', flags = {{{quoted}}},\n"
        f"callback = function(KEYS, ARGV)\n{script_text(script)}\nend}}"
    )


@cache
def library(names: Sequence[str]) -> Library:
    """Every script of ``names`` as one library: the helpers they use, defined once,
    then one registered function per script."""
    names = tuple(names)
    helpers = "\n".join(lua_file(f"_{h}") for h in helper_order(names))
    # the hash covers every script's text (a placeholder stands for the names it makes)
    body = "\n".join([helpers, *(_register("zq_@_" + n, n) for n in names)])
    digest = sha1(body)[:12]
    functions = {n: f"zq_{digest}_{n}" for n in names}
    registered = "\n".join(_register(functions[n], n) for n in names)
    name = f"{LIBRARY_PREFIX}{digest}"
    head = f"#!lua name={name}\n-- django_zqueue: every script of lua/ as one function library\n"
    return Library(name, f"{head}{helpers}\n{registered}\n", functions)


# ---------------------------------------------------------------- the wire protocol

#: the version of the wire protocol (docs/protocol.md) the protocol library speaks
PROTOCOL_VERSION = 1
#: its library's name: stable, so programs in other languages can call its functions
PROTOCOL_LIBRARY = f"zqueue_protocol_{PROTOCOL_VERSION}"
#: the protocol's scripts (``lua/proto_<name>.lua``) and the stable name each is
#: registered under; ``zq<v>_build`` (no file) returns the package version that loaded it
PROTOCOL_FUNCTIONS = {
    "proto_publish": f"zq{PROTOCOL_VERSION}_publish",
    "proto_position": f"zq{PROTOCOL_VERSION}_position",
}
#: the internal scripts the protocol's scripts call, each as a local function of the
#: protocol library (``<name>_core(KEYS, ARGV)``, its file's text as the body)
PROTOCOL_CORES = ("publish", "positions")
#: the protocol's read-only functions
PROTOCOL_READ_ONLY = frozenset({"proto_position"})
#: the line of the protocol library that holds the package version that made it
BUILD_RE = re.compile(r"^local ZQ_BUILD = '([^']*)'$", re.MULTILINE)


def version_tuple(version: str) -> tuple[int, ...]:
    """The numbers of a version (``0.12.3`` -> (0, 12, 3); ``1.0rc2`` -> (1, 0)): the
    leading digits of each dotted part, up to the first part that has none."""
    out: list[int] = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        out.append(int(digits.group()))
        if digits.end() != len(part):
            break
    return tuple(out)


@cache
def protocol_library(build: str) -> Library:
    """The protocol library (``FUNCTION LOAD``): the helpers its scripts and the cores use,
    each core as a local function, the package version ``build``, then ``zq1_build`` and
    one function per protocol script, under the stable names of
    :data:`PROTOCOL_FUNCTIONS`."""
    if not re.fullmatch(r"[0-9A-Za-z.+_-]+", build):
        raise ValueError(f"not a version: {build!r}")
    scripts = tuple(PROTOCOL_FUNCTIONS)
    helpers = "\n".join(lua_file(f"_{h}") for h in helper_order((*PROTOCOL_CORES, *scripts)))
    cores = "\n".join(
        f"local function {name}_core(KEYS, ARGV)\n{script_text(name)}\nend"
        for name in PROTOCOL_CORES
    )
    fn = f"zq{PROTOCOL_VERSION}_build"
    parts = [
        f"#!lua name={PROTOCOL_LIBRARY}",
        f"-- django_zqueue: wire protocol {PROTOCOL_VERSION} (docs/protocol.md)",
        helpers,
        cores,
        f"local ZQ_BUILD = '{build}'",
        f"redis.register_function{{function_name = '{fn}', flags = {{'no-writes'}},\n"
        "callback = function(KEYS, ARGV) return ZQ_BUILD end}",
    ]
    for script, function in PROTOCOL_FUNCTIONS.items():
        quoted = "'no-writes'" if script in PROTOCOL_READ_ONLY else ""
        parts.append(
            f"redis.register_function{{function_name = '{function}', flags = {{{quoted}}},\n"
            f"callback = function(KEYS, ARGV)\n{script_text(script)}\nend}}"
        )
    functions = {**PROTOCOL_FUNCTIONS, "build": fn}
    return Library(PROTOCOL_LIBRARY, "\n".join(parts) + "\n", functions)
