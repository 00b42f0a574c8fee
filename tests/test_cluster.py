"""Redis Cluster and Sentinel: settings, and failovers survived against real servers.

The settings tests need no server. The failover tests start their own private cluster
(3 masters, 3 replicas) or Sentinel setup (master, replica, 3 sentinels), since they
kill servers: a worker runs throughout, jobs are published before and after the
failover, and every publish Redis acknowledged must run (a ledger of publishes against
a ledger of runs). The rest of the suite runs against a cluster or Sentinel with
``ZQUEUE_TEST_TOPOLOGY=cluster|sentinel`` (see tests/redis_server.py and .ci/run).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.conf import parse
from django_zqueue.conf.redis_url import parse_redis_url
from django_zqueue.engine.redis import connection
from django_zqueue.exceptions import DuplicateJob, QueueUnavailable
from django_zqueue.ops import checks
from django_zqueue.worker import Worker
from testproject.demo import tasks

from . import topology

# the failover and dashboard tests start their own servers: redis-server and redis-cli
needs_servers = pytest.mark.skipif(
    not topology.available(), reason="needs redis-server and redis-cli on PATH"
)

# ------------------------------------------------------------------ settings


def test_cluster_url_names_startup_nodes() -> None:
    t = parse_redis_url("redis+cluster://u:p%40ss@10.0.0.1:7000,[::1]:7001,node-c")
    assert t.topology == "cluster"
    assert t.nodes == (("10.0.0.1", 7000), ("::1", 7001), ("node-c", 6379))
    assert (t.username, t.password, t.ssl, t.db) == ("u", "p@ss", False, 0)
    assert parse_redis_url("rediss+cluster://h:7000/0").ssl
    # CLUSTER=True reads a plain redis:// URL as the startup node(s)
    assert parse_redis_url("redis://h:7000,h:7001", cluster=True).nodes == (
        ("h", 7000),
        ("h", 7001),
    )


def test_sentinel_url_names_sentinels_service_and_db() -> None:
    t = parse_redis_url("redis+sentinel://:secret@s1:26379,s2/mymaster/2")
    assert t.topology == "sentinel"
    assert t.nodes == (("s1", 26379), ("s2", 26379))
    assert (t.service, t.db, t.password, t.username) == ("mymaster", 2, "secret", None)


def test_standalone_url_is_passed_through() -> None:
    t = parse_redis_url("redis://h:6379/3?health_check_interval=5")
    assert (t.topology, t.url) == ("standalone", "redis://h:6379/3?health_check_interval=5")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"REDIS_URL": "redis+sentinel://s1:26379"}, "names the service"),
        ({"REDIS_URL": "redis+sentinel://s1/svc/x"}, "not /<service>[/<db>]"),
        ({"REDIS_URL": "redis+cluster://h:7000/1"}, "database 0 only"),
        ({"REDIS_URL": "redis+cluster://h:99999"}, "is not host[:port]"),
        ({"REDIS_URL": "redis+cluster://h:7000?x=1"}, "no query string"),
        ({"REDIS_URL": "redis+cluster://"}, "no host"),
        ({"REDIS_URL": "redis://a:1,b:2/0"}, "several hosts"),
        ({"REDIS_URL": "unix:///tmp/r.sock", "CLUSTER": True}, "CLUSTER=True needs"),
        ({"REDIS_URL": "redis+sentinel://s/svc", "CLUSTER": True}, "CLUSTER=True needs"),
        ({"REDIS_URL": "memcached://h"}, "scheme 'memcached'"),
        ({"CLUSTER": "yes"}, "CLUSTER'] must be True or False"),
    ],
)
def test_bad_connection_settings_are_check_errors(value: dict[str, Any], message: str) -> None:
    with override_settings(ZQUEUE=value):
        try:
            errors = checks.check_settings()
        finally:
            conf.reset()
    assert [e.id for e in errors] == ["django_zqueue.E002"], errors
    assert message in errors[0].msg


def test_cluster_needs_a_redis_py_with_cluster_transactions() -> None:
    out = conf._Collector()
    conf._check_url("redis+cluster://h:7000", False, out, version=(5, 2))
    assert [p.id for p in out.problems] == ["django_zqueue.E014"]
    assert "redis-py >= 6.1" in out.problems[0].msg
    out = conf._Collector()
    conf._check_url("redis+cluster://h:7000", False, out, version=(6, 1))
    conf._check_url("redis://h:6379", False, out, version=(5, 0))  # standalone: any
    assert out.problems == []


def test_clients_by_topology() -> None:
    cluster, problems = parse({"REDIS_URL": "redis+cluster://127.0.0.1:7000", "SOCKET_TIMEOUT": 3})
    assert not problems
    # RedisCluster connects to its startup nodes at once: none listens here
    with pytest.raises(QueueUnavailable, match="Redis Cluster is unavailable"):
        connection.make_client(cluster)
    sentinel, problems = parse({"REDIS_URL": "redis+sentinel://127.0.0.1:1/svc/4"})
    assert not problems
    client = connection.make_client(sentinel)  # lazy: asks a sentinel on first use
    assert not connection.is_cluster(client)
    assert client.connection_pool.connection_kwargs["db"] == 4
    assert connection.socket_timeout(client) == 5.0
    with pytest.raises(redis.ConnectionError):
        client.ping()


# ------------------------------------------------------------------ failovers


def _wait(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _wait_drained(names: list[str]) -> None:
    """Every queue empties, and nothing went to the dead letters.

    A job claimed on a master that is killed before the claim reached its replica is
    ready again on the promoted replica: the worker runs it a second time (at least
    once), after the ledger already holds it. So the queues are waited for, not read
    once; a job stuck in any state still fails the test at the timeout."""

    def drained() -> bool:
        for name in names:
            counts = get_queue(name).counts()
            assert counts["dead"] == 0, (name, counts)
            if counts["ready"] or counts["delayed"] or counts["inflight"]:
                return False
        return True

    _wait("every queue to drain", drained)


def _done(ledger: Path) -> set[str]:
    if not ledger.exists():
        return set()
    return {line.split()[1] for line in ledger.read_text().splitlines() if line.startswith("done")}


class Publisher:
    """Publishes tagged jobs, retrying through a failover; records what Redis acked."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self.acked: list[str] = []  # tags whose publish Redis acknowledged

    def publish(self, queue: str, tag: str) -> None:
        task = tasks.sleep.using(queue=queue, tag=tag, on_commit=False)
        for _ in range(100):  # bounded: ~30 s at most
            try:
                task.enqueue(0.005, str(self.ledger), tag)
            except DuplicateJob:
                pass  # an earlier try went through; its reply was lost
            except QueueUnavailable:
                time.sleep(0.3)
                continue
            self.acked.append(tag)
            return
        raise AssertionError(f"could not publish {tag}")


@contextmanager
def running_worker(queues: list[str]) -> Iterator[Worker]:
    """A worker serving ``queues`` in a thread; stopped (and joined) on exit."""
    w = Worker(queues, concurrency=2, scan_interval=0.2)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        yield w
    finally:
        w.stop()
        t.join(30)


def _queues_on_every_master(cluster: topology.Cluster, prefix: str) -> dict[str, str]:
    """One queue name per master: name -> the master's address."""
    client = cluster.client()
    found: dict[str, str] = {}
    for i in range(300):  # bounded search over names
        name = f"q{i}"
        node = client.get_node_from_key(f"{{{prefix}:{name}}}:ready")
        if node.name not in found.values():
            found[name] = node.name
        if len(found) == 3:
            return found
    raise AssertionError("no queue names on three masters")


def _replica_of(cluster: topology.Cluster, master_addr: str) -> str:
    nodes = cluster.nodes()
    master_id = next(n["id"] for n in nodes if n["addr"] == master_addr)
    replicas = [n["addr"] for n in nodes if n["master"] == master_id]
    assert replicas, (master_addr, nodes)
    return replicas[0]


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def _role(addr: str) -> str:
    """The role a node gives itself (other nodes' views may lag)."""
    return str(redis.Redis(port=_port(addr), socket_timeout=2).info("replication")["role"])


def _settings(url: str, prefix: str, queues: list[str]) -> dict[str, Any]:
    return {
        **settings.ZQUEUE,
        "REDIS_URL": url,
        "PREFIX": prefix,
        # "default" too: the testproject has a periodic schedule on it
        "QUEUES": {"default": {}, **{q: {"visibility_timeout": 5} for q in queues}},
    }


@pytest.mark.slow
@needs_servers
def test_cluster_failovers_lose_no_acknowledged_job(tmp_path: Path) -> None:
    """A manual CLUSTER FAILOVER of one master, then SIGKILL of another, while a worker
    serves three queues on three masters: every acknowledged publish runs."""
    cluster = topology.start_cluster(node_timeout_ms=2000)
    try:
        prefix = f"zqf-{uuid.uuid4().hex[:8]}"
        placement = _queues_on_every_master(cluster, prefix)
        names = list(placement)
        ledger = tmp_path / "ledger"
        pub = Publisher(ledger)
        with override_settings(ZQUEUE=_settings(cluster.url, prefix, names)):
            try:
                with running_worker(names):
                    for i in range(30):
                        pub.publish(names[i % 3], f"a{i}")
                    _wait("some jobs to run", lambda: len(_done(ledger)) >= 5)

                    # 1. manual failover: the replica takes over in agreement with its master
                    old = placement[names[0]]
                    replica = _replica_of(cluster, old)
                    redis.Redis(port=_port(replica)).execute_command("CLUSTER FAILOVER")
                    _wait("the replica to become master", lambda: _role(replica) == "master")
                    for i in range(30):
                        pub.publish(names[i % 3], f"b{i}")

                    # 2. a crash: every write so far is on a replica first (replication is
                    # asynchronous; what a crashed master had not sent is Redis' loss)
                    victim = placement[names[1]]
                    for port in cluster.ports:
                        if _role(f"127.0.0.1:{port}") == "master":
                            assert redis.Redis(port=port).wait(1, 5000) >= 1
                    cluster.servers.kill(_port(victim))
                    for i in range(30):
                        pub.publish(names[i % 3], f"c{i}")

                    _wait("every acknowledged job to run", lambda: set(pub.acked) <= _done(ledger))
                    assert len(pub.acked) == 90
                    _wait_drained(names)
            finally:
                conf.reset()
        errors = cluster.crossslot_errors()
        assert errors == 0
    finally:
        cluster.stop()


@pytest.mark.slow
@needs_servers
def test_sentinel_master_killed_loses_no_acknowledged_job(tmp_path: Path) -> None:
    """SIGKILL of the master while a worker runs: the sentinels promote the replica, the
    worker and the publisher find it, and every acknowledged publish runs."""
    setup = topology.start_sentinel(down_after_ms=1000)
    try:
        prefix = f"zqs-{uuid.uuid4().hex[:8]}"
        names = ["default", "other"]
        ledger = tmp_path / "ledger"
        pub = Publisher(ledger)
        with override_settings(ZQUEUE=_settings(setup.url, prefix, names)):
            try:
                with running_worker(names):
                    for i in range(30):
                        pub.publish(names[i % 2], f"a{i}")
                    _wait("some jobs to run", lambda: len(_done(ledger)) >= 5)
                    assert redis.Redis(port=setup.master_port).wait(1, 5000) == 1
                    setup.servers.kill(setup.master_port)
                    _wait(
                        "the sentinels to promote the replica",
                        lambda: setup.current_master()[1] == setup.replica_port,
                    )
                    for i in range(30):
                        pub.publish(names[i % 2], f"b{i}")
                    _wait("every acknowledged job to run", lambda: set(pub.acked) <= _done(ledger))
                    assert len(pub.acked) == 60
                    _wait_drained(names)
            finally:
                conf.reset()
    finally:
        setup.stop()


def _migrate_slot(slot: int, src_addr: str, dst_addr: str, keys_per_call: int) -> int:
    """Move ``slot`` from one master to another as ``redis-cli --cluster reshard`` does:
    IMPORTING/MIGRATING, MIGRATE of its keys a few at a time (so scripts meet the slot
    half moved: ASK and TRYAGAIN), then SETSLOT NODE. Returns the keys moved."""
    src, dst = redis.Redis(port=_port(src_addr)), redis.Redis(port=_port(dst_addr))
    src_id = src.execute_command("CLUSTER MYID").decode()
    dst_id = dst.execute_command("CLUSTER MYID").decode()
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    moved = 0
    for _ in range(2000):  # bounded: new keys may appear on the source meanwhile
        keys = src.execute_command("CLUSTER GETKEYSINSLOT", slot, keys_per_call)
        if not keys:
            break
        src.execute_command("MIGRATE", "127.0.0.1", _port(dst_addr), "", 0, 5000, "KEYS", *keys)
        moved += len(keys)
        time.sleep(0.1)  # leave the slot split for a while
    else:
        raise AssertionError("the slot did not empty")
    for node in (dst, src):
        node.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    return moved


def _error_counts(cluster: topology.Cluster) -> dict[str, int]:
    totals: dict[str, int] = {}
    for port, proc in cluster.servers.procs.items():
        if proc.poll() is None:
            for name, v in redis.Redis(port=port, socket_timeout=2).info("errorstats").items():
                totals[name] = totals.get(name, 0) + int(v.get("count", 0))
    return totals


@pytest.mark.slow
@needs_servers
def test_cluster_slot_migration_while_workers_run(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A queue's slot moves to another master (CLUSTER SETSLOT + MIGRATE, a few keys at a
    time) while a worker runs its jobs and a publisher adds more: jobs keep flowing,
    every acknowledged publish runs, nothing is left in the queue (issue 15, item 5).
    With --fault-long the slot moves back and forth 10 times."""
    rounds = 10 if request.config.getoption("--fault-long") else 1
    cluster = topology.start_cluster(masters=3, replicas=0)
    try:
        prefix = f"zqm-{uuid.uuid4().hex[:8]}"
        name = "moving"
        client = cluster.client()
        slot = client.keyslot(f"{{{prefix}:{name}}}:ready")
        src = client.get_node_from_key(f"{{{prefix}:{name}}}:ready").name
        dst = next(f"127.0.0.1:{p}" for p in cluster.ports if f"127.0.0.1:{p}" != src)
        ledger = tmp_path / "ledger"
        pub = Publisher(ledger)
        stop = threading.Event()
        published_during: list[int] = []

        def publish_until_stopped() -> None:
            i = 0
            while not stop.is_set() and i < 2000:
                pub.publish(name, f"m{i}")
                i += 1
                time.sleep(0.01)
            published_during.append(i)

        with override_settings(ZQUEUE=_settings(cluster.url, prefix, [name])):
            try:
                with running_worker([name]):
                    for i in range(50):
                        pub.publish(name, f"a{i}")
                    _wait("some jobs to run", lambda: len(_done(ledger)) >= 5)
                    publisher = threading.Thread(target=publish_until_stopped)
                    publisher.start()
                    time.sleep(1.0)
                    before = _error_counts(cluster)
                    took, moved, here, there = [], 0, src, dst
                    for _ in range(rounds):
                        t0 = time.monotonic()
                        moved += _migrate_slot(slot, here, there, keys_per_call=2)
                        took.append(time.monotonic() - t0)
                        here, there = there, here
                        time.sleep(1.0)  # jobs flow on the slot's new master
                    stop.set()
                    publisher.join(60)
                    for i in range(50):
                        pub.publish(name, f"z{i}")
                    _wait("every acknowledged job to run", lambda: set(pub.acked) <= _done(ledger))
                    counts = get_queue(name).counts()
                    assert counts == {"ready": 0, "delayed": 0, "inflight": 0, "dead": 0}, counts
                    errors = {
                        k: v - before.get(k, 0)
                        for k, v in _error_counts(cluster).items()
                        if v != before.get(k, 0)
                    }
            finally:
                conf.reset()
        # the keys live on the slot's last master now, none on the other one
        count = "CLUSTER COUNTKEYSINSLOT"
        assert redis.Redis(port=_port(here)).execute_command(count, slot) > 0
        assert redis.Redis(port=_port(there)).execute_command(count, slot) == 0
        lines = ledger.read_text().splitlines()
        starts = [ln.split()[1] for ln in lines if ln.startswith("start")]
        dups = len(starts) - len(set(starts))
        print(
            f"\nFAULT slot-migration jobs={len(pub.acked)} published_during={published_during} "
            f"migrations={rounds} keys_moved={moved} migration_s max={max(took):.2f} "
            f"duplicates={dups} "
            f"server_errors_during={errors}"
        )
        assert len(set(pub.acked)) == len(pub.acked) >= 100 + published_during[0]
        assert moved > 0
        assert cluster.crossslot_errors() == 0
    finally:
        cluster.stop()


# ------------------------------------------------------------------ dashboard, stats


@needs_servers
def test_dashboard_and_stats_on_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The admin's overview, page and job views and zqueue_stats read queues on several
    masters (no TIME in cluster pipelines, no cross-slot pipeline)."""
    from django_zqueue.admin import dashboard

    cluster = topology.start_cluster(masters=3, replicas=0)
    try:
        prefix = f"zqd-{uuid.uuid4().hex[:8]}"
        names = list(_queues_on_every_master(cluster, prefix))
        with override_settings(ZQUEUE=_settings(cluster.url, prefix, names)):
            try:
                for i, name in enumerate(names):
                    get_queue(name).publish_many(range(i + 1))
                queues = [get_queue(n) for n in names]
                summaries = dashboard.overview(queues)
                assert [s.ready for s in summaries] == [1, 2, 3]
                listing = dashboard.page(queues[2], "ready", 1, 10, payload=True)
                assert listing.total == 3 and listing.now_ms > 0
                tag = listing.rows[0].tag
                detail = dashboard.job(queues[2], tag, payload=True)
                assert detail is not None and detail.now_ms > 0
                assert [loc.queue for loc in dashboard.locate(queues, tag)] == [names[2]]
                found = queues[2].read.search(tag)  # search.lua on its queue's master
                assert [(m.tag, m.rank) for m in found.matches] == [(tag, 0)] and found.done
                assert len(queues[0].minutes(5)) == 5
                call_command("zqueue_stats")
                out = capsys.readouterr().out
                assert all(n in out for n in names)

                # a worker's pipeline of script calls on several masters: each EVALSHA is
                # routed by its key, with no COMMAND GETKEYS round trip per call
                for port in cluster.ports:
                    redis.Redis(port=port).config_resetstat()
                msgs = [m for q in queues for m in q.claim(3)[0]]
                batch = queues[0].engine.batch()
                pending = [batch.add(get_queue(m.queue).engine.consume.ack_call(m)) for m in msgs]
                batch.send()
                assert [p.result() for p in pending] == [True] * 6
                calls = {
                    port: redis.Redis(port=port).info("commandstats") for port in cluster.ports
                }
                ran = [c["cmdstat_evalsha"] for c in calls.values() if "cmdstat_evalsha" in c]
                # 3 claims and 6 acks ran (and the first call of each script on a fresh
                # node failed with NOSCRIPT, then was sent again)
                assert sum(x["calls"] - x["failed_calls"] for x in ran) == 9

                # check --deploy reads every master's eviction policy
                assert checks.eviction_warning(queues[0].engine._client) is None
                port = cluster.ports[1]
                redis.Redis(port=port).config_set("maxmemory-policy", "allkeys-lru")
                warning = checks.eviction_warning(queues[0].engine._client)
                assert warning is not None and f"allkeys-lru' on 127.0.0.1:{port}" in warning
                assert not any("cmdstat_command|getkeys" in c for c in calls.values()), calls
            finally:
                conf.reset()
        assert cluster.crossslot_errors() == 0
    finally:
        cluster.stop()
