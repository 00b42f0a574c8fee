"""The engine put together by composition (django_zqueue/engine/__init__.py): a core
(``engine.base.Core``) and capability objects holding it, one module each.

- ``Engine`` is the core and nothing else by inheritance: no chain of mixins.
- A caller asks a capability object: the engine holds no copy of its verbs.
- The core is built from named steps: ``policy_of(options)`` is the engine's policy,
  ``check_options`` refuses what the engine refused, before anything is built.
"""

from __future__ import annotations

import pytest

from django_zqueue.conf import QueueOptions
from django_zqueue.engine import (
    Claims,
    Consume,
    Control,
    Durable,
    Engine,
    FlowPublish,
    Layout,
    Positions,
    Reads,
    Results,
    Sets,
    Stats,
    WireProtocol,
    Workers,
    Workflows,
    Writes,
)
from django_zqueue.engine.base import Core, EngineBase, check_options, policy_of
from django_zqueue.engine.flow import Flow
from django_zqueue.exceptions import ConfigurationError, InvalidArgument

from .conftest import QueueFactory

#: each capability object of an engine and its class
PARTS = {
    "layout": Layout,
    "consume": Consume,
    "flow": Workflows,
    "reads": Reads,
    "workers": Workers,
    "protocol": WireProtocol,
    "results": Results,
    "stats": Stats,
    "positions": Positions,
    "writes": Writes,
    "control": Control,
    "sets": Sets,
    "claims": Claims,
    "durable": Durable,
    "flow_publish": FlowPublish,
}


#: the core's names callers use, kept where they were
CORE_NAMES = [
    "name",
    "options",
    "prefix",
    "_keys",
    "partitions",
    "_client",
    "_scripts",
    "policy",
    "claim_chunk",
    "_shards",
    "_sched_keys",
    "_notify_keys",
    "_notify_groups",
    "wait_turn",
    "max_block",
    "lease_ms",
    "_shard_for",
    "_front_of_others",
    "_keys_for",
    "_keys_of",
    "other",
    "_part_keys",
    "_next_shard",
    "batch",
    "send",
    "run_all",
    "run",
]


def test_the_engine_is_a_core_with_capability_objects(make_queue: QueueFactory) -> None:
    engine = make_queue("parts", partitions=2).engine
    assert type(engine).__mro__ == (Engine, Core, object)
    assert EngineBase is Core and Flow is Core  # the old names of the type, kept
    for attr, cls in PARTS.items():
        assert type(getattr(engine, attr)) is cls, attr
    for name in CORE_NAMES:
        assert hasattr(engine, name), name


def test_the_engine_has_no_forwarders_only_its_core_and_capability_objects(
    make_queue: QueueFactory,
) -> None:
    """A caller asks a capability object (``engine.consume.plan_claim``), never a copy of
    its verb on the engine: the engine's public names are the core's and the objects'."""
    engine = make_queue("names").engine
    core = {n for n in dir(Core) if not n.startswith("_")} | set(vars(engine))
    extra = {n for n in dir(engine) if not n.startswith("_")} - core
    assert extra == set(), extra
    for attr, cls in PARTS.items():
        assert not hasattr(Engine, attr), attr  # an instance's object, not a class's method
        assert isinstance(getattr(engine, attr), cls)


@pytest.mark.parametrize(
    "options",
    [
        QueueOptions(),
        QueueOptions(partitions=4, max_length=10, keep_finished=7),
        QueueOptions(fairness="groups", group_max_length=5, concurrency=2, qps=3),
        QueueOptions(partitions=2, priority_mode="strict"),
    ],
)
def test_policy_of_the_options_is_the_engines_policy(
    make_queue: QueueFactory, options: QueueOptions
) -> None:
    engine = make_queue("policy").engine
    built = Engine("policy", options, prefix=engine.prefix, client=engine._client)
    assert built.policy == policy_of(options)
    assert len(built._shards) == options.partitions


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (QueueOptions(partitions=0), InvalidArgument),
        (QueueOptions(partitions=True), InvalidArgument),
        (QueueOptions(partitions=2, concurrency=1), InvalidArgument),
        (QueueOptions(group_max_length=3), ConfigurationError),
    ],
)
def test_check_options_refuses_before_anything_is_built(
    options: QueueOptions, error: type[Exception]
) -> None:
    with pytest.raises(error):
        check_options("bad", options)
    with pytest.raises(error):
        Engine("bad", options, client=object())  # type: ignore[arg-type]
