"""The Lua scripts, loaded once, with one typed method per script.

Each ``lua/<name>.lua`` file holds one atomic operation and starts with its contract
(KEYS, ARGV, return value). Helpers live in ``lua/_<helper>.lua`` (no key access of
their own); a script names the ones it calls with ``--@include <helper>`` lines and
:func:`source` prepends them, and what they include in turn, once each, dependencies
first. A call is a plain ``EVALSHA`` (no ``SCRIPT EXISTS`` round trip);
after a ``SCRIPT FLUSH`` the NOSCRIPT reply makes it load the source and send the call
once more (Redis ran nothing for a NOSCRIPT, so nothing runs twice).

On a Redis Cluster, redis-py routes each EVALSHA by its first key (all keys of a queue
share one slot) and ``SCRIPT LOAD`` goes to every master. A cluster pipeline refuses
``evalsha()`` (and redis-py's ``Script`` with it), so script calls in any pipeline are
queued as plain ``EVALSHA`` commands, and :meth:`Scripts.execute` loads the scripts and
resends what got NOSCRIPT: a replica promoted by a failover has no scripts loaded.

These methods do no validation: :class:`~django_zqueue.queue.Queue` validates first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, TypeAlias

from redis.cluster import ClusterPipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError

from .keys import QueueKeys

Client: TypeAlias = Any  # redis.Redis, or a pipeline of one
Arg: TypeAlias = str | bytes | int | float

SCRIPT_NAMES = (
    "publish",
    "claim",
    "ack",
    "release",
    "nack",
    "touch",
    "scan",
    "delete",
    "requeue_dead",
    "purge_dead",
    "info",
    "state",
    "fire",
)


#: ``--@include <helper>``: the script (or helper) calls something ``lua/_<helper>.lua`` defines
INCLUDE_RE = re.compile(r"^--@include (\w+)[ \t]*$", re.MULTILINE)


def lua_file(name: str) -> str:
    """The text of ``lua/<name>.lua`` (a helper's name starts with ``_``)."""
    return (resources.files("django_zqueue") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def includes(name: str) -> list[str]:
    """The helpers ``lua/<name>.lua`` names in its ``--@include`` lines, in order."""
    return INCLUDE_RE.findall(lua_file(name))


@cache
def source(name: str) -> str:
    """The full source sent to Redis for script ``name``: the helpers it includes (and
    theirs), each once, each after the helpers it uses, then the operation."""
    order: list[str] = []

    def visit(helper: str, path: tuple[str, ...]) -> None:
        if helper in path:
            raise ValueError(f"lua include cycle: {' -> '.join((*path, helper))}")
        if helper not in order:
            for inner in includes(f"_{helper}"):
                visit(inner, (*path, helper))
            order.append(helper)

    for helper in includes(name):
        visit(helper, (name,))
    return "\n".join([*(lua_file(f"_{h}") for h in order), lua_file(name)])


def is_cluster_pipeline(client: Any) -> bool:
    return isinstance(client, ClusterPipeline)


try:  # redis-py >= 8: command routing policies
    from redis._parsers.commands import CommandPolicies, RequestPolicy, ResponsePolicy
    from redis.commands.policies import BasePolicyResolver

    _KEYED = CommandPolicies(
        request_policy=RequestPolicy.DEFAULT_KEYED, response_policy=ResponsePolicy.DEFAULT_KEYED
    )

    class _EvalshaIsKeyed(BasePolicyResolver):
        """EVALSHA is routed by its keys: redis-py's own ``determine_slot`` (first key)."""

        def __init__(self, fallback: Any = None) -> None:
            super().__init__({"core": {"evalsha": _KEYED}}, fallback)

        def with_fallback(self, fallback: Any) -> Any:
            return _EvalshaIsKeyed(fallback)

except ImportError:  # older redis-py: its cluster pipeline routes EVALSHA by key already
    _EvalshaIsKeyed = None  # type: ignore[assignment,misc]


def _route_evalsha_by_key(pipe: Any) -> None:
    """redis-py 8's cluster pipeline looks up a routing policy for each command and,
    finding none for EVALSHA, asks a node for the call's keys (``COMMAND GETKEYS``): one
    more round trip per script call in a pipeline (outside pipelines it routes EVALSHA by
    its first key, as here). Its ``RedisCluster.pipeline()`` does not pass on a client's
    resolver, so the pipeline is given one that knows EVALSHA is keyed."""
    resolver = getattr(pipe, "_policy_resolver", None)
    if _EvalshaIsKeyed is not None and resolver is not None:
        pipe._policy_resolver = _EvalshaIsKeyed(fallback=resolver)


def _command(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, options) of a queued pipeline command (a tuple, or redis-py's cluster
    ``PipelineCommand``)."""
    if isinstance(entry, tuple):
        return entry[0], entry[1]
    return tuple(entry.args), dict(entry.options)


def _is_noscript(reply: Any) -> bool:
    # a cluster pipeline may wrap the server's error in a plain ResponseError
    return isinstance(reply, NoScriptError) or (
        isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT")
    )


class Scripts:
    """The scripts registered on one redis-py client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._s = {name: Script(client, source(name)) for name in SCRIPT_NAMES}

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Arg], client: Client) -> Any:
        script = self._s[name]
        if getattr(client, "_zq_plain_evalsha", False) or is_cluster_pipeline(client):
            # a pipeline from self.pipeline(), or a cluster pipeline (which refuses
            # evalsha() and redis-py's Script): no SCRIPT EXISTS round trip before it;
            # self.execute() loads the scripts and resends what got NOSCRIPT
            return client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        if client is not None and client is not self.client:
            return script(keys=keys, args=args, client=client)  # another pipeline
        # one call: plain EVALSHA; after a SCRIPT FLUSH (NOSCRIPT: Redis ran nothing),
        # load the source and send the call once more
        try:
            return self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            self.client.script_load(script.script)
            return self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)

    def pipeline(self) -> Any:
        """A non-transactional pipeline whose script calls are plain EVALSHA.

        redis-py checks ``SCRIPT EXISTS`` before every pipeline holding ``Script`` calls:
        one more round trip per pipeline, a third of a worker's time on the hot path.
        Run it with :meth:`execute`."""
        pipe = self.client.pipeline(transaction=False)
        pipe._zq_plain_evalsha = True
        if is_cluster_pipeline(pipe):
            _route_evalsha_by_key(pipe)
        return pipe

    def execute(self, pipe: Any, raise_on_error: bool = True) -> list[Any]:
        """Execute a pipeline from :meth:`pipeline`. After a ``SCRIPT FLUSH``, the calls
        that got NOSCRIPT (Redis ran nothing for them) are sent again, alone, once the
        scripts are loaded; every other reply is kept as it came."""
        queued = pipe._execution_strategy.command_queue if is_cluster_pipeline(pipe) else None
        stack = [_command(c) for c in (pipe.command_stack if queued is None else queued)]
        replies = list(pipe.execute(raise_on_error=False))
        missing = [i for i, r in enumerate(replies) if _is_noscript(r)]
        if missing:
            for script in self._s.values():
                self.client.script_load(script.script)
            again = self.pipeline()
            for i in missing:
                args, options = stack[i]
                again.pipeline_execute_command(*args, **options)
            for i, reply in zip(missing, again.execute(raise_on_error=False), strict=True):
                replies[i] = reply
        if raise_on_error:
            for r in replies:
                if isinstance(r, Exception):
                    raise r
        return replies

    def publish(
        self,
        k: QueueKeys,
        mode: str,
        aging_us: int,
        notify_cap: int,
        jobs: Sequence[Sequence[Arg]],
        client: Client = None,
    ) -> Any:
        args: list[Arg] = [mode, aging_us, notify_cap, len(jobs)]
        for job in jobs:
            args.extend(job)
        keys = [k.ready, k.delayed, k.body, k.meta, k.ctr, k.notify, k.stats, k.dead, k.leased]
        return self._run("publish", keys, args, client)

    def claim(
        self,
        k: QueueKeys,
        batch: int,
        visibility_ms: int,
        concurrency: int,
        qps: float,
        promote_limit: int,
        mode: str,
        aging_us: int,
        consumer: str,
        client: Client = None,
    ) -> Any:
        keys = [
            k.ready,
            k.delayed,
            k.leased,
            k.body,
            k.meta,
            k.ctr,
            k.rate,
            k.stats,
            k.dead,
            k.errors,
        ]
        args: list[Arg] = [
            batch,
            visibility_ms,
            concurrency,
            qps,
            promote_limit,
            mode,
            aging_us,
            consumer,
        ]
        return self._run("claim", keys, args, client)

    def ack(
        self,
        k: QueueKeys,
        id: str,
        token: int,
        notify_cap: int,
        result: str = "",
        result_ttl_ms: int = 0,
        run_ms: int | None = None,
        client: Client = None,
    ) -> Any:
        keys = [k.leased, k.body, k.meta, k.errors, k.progress, k.stats, k.notify, k.result(id)]
        args: list[Arg] = [
            id,
            token,
            notify_cap,
            result,
            result_ttl_ms,
            "" if run_ms is None else run_ms,
        ]
        return self._run("ack", keys, args, client)

    def release(
        self,
        k: QueueKeys,
        id: str,
        token: int,
        mode: str,
        aging_us: int,
        notify_cap: int,
        client: Client = None,
    ) -> Any:
        keys = [k.leased, k.ready, k.meta, k.ctr, k.progress, k.stats, k.notify]
        return self._run("release", keys, [id, token, mode, aging_us, notify_cap], client)

    def nack(
        self,
        k: QueueKeys,
        id: str,
        token: int,
        error: str,
        retry_ms: int,
        bury: bool,
        mode: str,
        aging_us: int,
        dead_max: int,
        dead_ttl_ms: int,
        trim_limit: int,
        notify_cap: int,
        client: Client = None,
    ) -> Any:
        keys = k.lifecycle()
        args: list[Arg] = [
            id,
            token,
            error,
            retry_ms,
            "1" if bury else "0",
            mode,
            aging_us,
            dead_max,
            dead_ttl_ms,
            trim_limit,
            notify_cap,
        ]
        return self._run("nack", keys, args, client)

    def touch(
        self,
        k: QueueKeys,
        id: str,
        token: int,
        extend_ms: int,
        progress: str,
        default_visibility_ms: int = 0,
        client: Client = None,
    ) -> Any:
        keys = [k.leased, k.meta, k.progress]
        args: list[Arg] = [id, token, extend_ms, progress, default_visibility_ms]
        return self._run("touch", keys, args, client)

    def scan(
        self,
        k: QueueKeys,
        limit: int,
        mode: str,
        aging_us: int,
        dead_max: int,
        dead_ttl_ms: int,
        notify_cap: int,
        client: Client = None,
    ) -> Any:
        keys = k.lifecycle()
        args: list[Arg] = [limit, mode, aging_us, dead_max, dead_ttl_ms, notify_cap]
        return self._run("scan", keys, args, client)

    def delete(
        self, k: QueueKeys, id: str, waiting_only: bool = False, client: Client = None
    ) -> Any:
        keys = [k.ready, k.delayed, k.dead, k.leased, k.body, k.meta, k.errors, k.progress, k.stats]
        return self._run("delete", keys, [id, "1" if waiting_only else "0"], client)

    def requeue_dead(
        self,
        k: QueueKeys,
        id: str,
        mode: str,
        aging_us: int,
        notify_cap: int,
        client: Client = None,
    ) -> Any:
        keys = [k.dead, k.ready, k.meta, k.ctr, k.stats, k.notify, k.errors]
        return self._run("requeue_dead", keys, [id, mode, aging_us, notify_cap], client)

    def purge_dead(self, k: QueueKeys, limit: int, client: Client = None) -> Any:
        keys = [k.dead, k.body, k.meta, k.errors, k.progress]
        return self._run("purge_dead", keys, [limit], client)

    def info(self, k: QueueKeys, id: str, with_body: bool, client: Client = None) -> Any:
        keys = [k.ready, k.delayed, k.leased, k.dead, k.meta, k.errors, k.progress, k.body]
        return self._run("info", keys, [id, "1" if with_body else "0"], client)

    def state(self, k: QueueKeys, id: str, client: Client = None) -> Any:
        return self._run("state", [k.ready, k.delayed, k.leased, k.dead], [id], client)

    def fire(
        self,
        k: QueueKeys,
        name: str,
        expected_tick: int,
        next_tick: int | None,
        fire: bool,
        mode: str,
        aging_us: int,
        notify_cap: int,
        job: Sequence[Arg],
        client: Client = None,
    ) -> Any:
        keys = [
            k.ready,
            k.delayed,
            k.body,
            k.meta,
            k.ctr,
            k.notify,
            k.stats,
            k.dead,
            k.leased,
            k.sched,
            k.sched_last,
        ]
        args: list[Arg] = [
            name,
            expected_tick,
            "" if next_tick is None else next_tick,
            "1" if fire else "0",
            mode,
            aging_us,
            notify_cap,
            *job,
        ]
        return self._run("fire", keys, args, client)
