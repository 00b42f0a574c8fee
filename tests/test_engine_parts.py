"""The engine put together by composition (django_zqueue/engine/__init__.py): a core
(``engine.base.Core``) and capability objects holding it, one module each.

- ``Engine`` is the core and nothing else by inheritance: no chain of mixins.
- Every name callers used on an engine before the split is still there, with the same
  signature as the capability verb it forwards to, and gives the same answer.
- The core is built from named steps: ``policy_of(options)`` is the engine's policy,
  ``check_options`` refuses what the engine refused, before anything is built.
"""

from __future__ import annotations

import inspect

import pytest

from django_zqueue.conf import QueueOptions
from django_zqueue.engine import (
    Consume,
    Engine,
    Layout,
    Positions,
    Reads,
    Results,
    Stats,
    WireProtocol,
    Workers,
    Workflows,
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
}

#: the names an engine had before the split -> (capability, its verb)
FORWARDED = {
    "check_layout": ("layout", "check"),
    "ensure_layout": ("layout", "ensure"),
    "clear": ("layout", "clear"),
    "plan_claim": ("consume", "plan_claim"),
    "claim_rest": ("consume", "claim_rest"),
    "make_ack": ("consume", "make_ack"),
    "ack_call": ("consume", "ack_call"),
    "add_acks": ("consume", "add_acks"),
    "settle_acks": ("consume", "settle_acks"),
    "release_call": ("consume", "release_call"),
    "nack_call": ("consume", "nack_call"),
    "touch_call": ("consume", "touch_call"),
    "state_call": ("consume", "state_call"),
    "info_call": ("consume", "info_call"),
    "link_parents": ("flow", "link_parents"),
    "flow_calls": ("flow", "flow_calls"),
    "dispatch": ("flow", "dispatch"),
    "settle_ends": ("flow", "settle_ends"),
    "read_outbox": ("flow", "read_outbox"),
    "configured_engines": ("flow", "configured_engines"),
    "dispatch_once": ("flow", "dispatch_once"),
    "drain": ("flow", "drain"),
    "wakeups": ("workers", "wakeups"),
    "wrong_types": ("workers", "wrong_types"),
    "register_worker": ("workers", "register"),
    "forget_workers": ("workers", "forget"),
    "workers_key": ("workers", "key"),
    "protocol_policy": ("protocol", "policy"),
    "publish_protocol": ("protocol", "publish"),
    "restore_protocol": ("protocol", "restore"),
    "proto_key": ("protocol", "key"),
    "protocol_loaded": ("protocol", "loaded"),
    "protocol_stored": ("protocol", "stored"),
    "result_raw": ("results", "raw"),
    "store_result": ("results", "store"),
    "were_cancelled": ("results", "were_cancelled"),
    "incr_stat": ("stats", "incr"),
    "add_task_stats": ("stats", "add_task_stats"),
    "ready_standing": ("positions", "ready_standing"),
    "ahead_elsewhere": ("positions", "ahead_elsewhere"),
    "add_positions": ("positions", "add_positions"),
    "add_job_read": ("positions", "add_job_read"),
    "overdue": ("positions", "overdue"),
    "server_ms": ("positions", "server_ms"),
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


@pytest.mark.parametrize("old", sorted(FORWARDED))
def test_each_old_name_forwards_with_the_verbs_signature(old: str) -> None:
    part, verb = FORWARDED[old]
    forwarder = inspect.signature(getattr(Engine, old))
    target = inspect.signature(getattr(PARTS[part], verb))
    assert list(forwarder.parameters.values())[1:] == list(target.parameters.values())[1:]
    assert forwarder.return_annotation == target.return_annotation


def test_the_old_names_give_the_verbs_answers(make_queue: QueueFactory) -> None:
    q = make_queue("answers", partitions=3)
    e = q.engine
    tags = [f"t{i}" for i in range(6)]
    for tag in tags:
        q.publish({"n": tag}, tag=tag)
    for tag in tags:
        assert e.ready_standing(tag) == e.positions.ready_standing(tag)
        assert e.ready_standing(tag)[0] is not None
    assert e.protocol_policy() == e.protocol.policy()
    assert e.protocol_policy()["partitions"] == "3"
    assert e.workers_key() == e.workers.key() and e.proto_key() == e.protocol.key()
    assert e.were_cancelled(tags) == e.results.were_cancelled(tags) == set()
    assert e.read_outbox(tags) == e.flow.read_outbox(tags) == []
    assert e.drain() == e.flow.drain() == 0
    plan = e.plan_claim(2, "c1")
    msgs, hint = e.claim_rest(plan, e.run(plan.call))
    assert len(msgs) == 2 and hint is None
    assert {m.tag for m in msgs} <= set(tags)
    assert e.run(e.state_call(msgs[0].tag)) == e.run(e.consume.state_call(msgs[0].tag))


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
