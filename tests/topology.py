"""Private Redis Cluster and Sentinel setups on free loopback ports, for tests and bench.

``start_cluster()`` runs ``masters * (1 + replicas)`` ``redis-server --cluster-enabled
yes`` processes and joins them with ``redis-cli --cluster create``; ``start_sentinel()``
runs a master, one replica and three sentinels (quorum 2). Nothing is kept on disk but
the nodes' own config files, in a temporary directory removed by ``stop()`` (also
registered with ``atexit``). Every wait is bounded; a setup that does not come up raises
``RuntimeError`` with the reason.

``ZQUEUE_TEST_TOPOLOGY=cluster`` (or ``sentinel``) makes ``tests/redis_server.py`` start
one of these for the whole test session, so the same tests run against it.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from django_zqueue.engine.redis.embedded import find_binary, free_port


def available() -> bool:
    """True when a server binary and redis-cli (for ``--cluster create``) are at hand."""
    return find_binary() is not None and shutil.which("redis-cli") is not None


def _cli() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        raise RuntimeError("redis-cli is needed to create a cluster")
    return found


def _until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Servers:
    """Processes started in one temporary directory; ``stop()`` kills them all."""

    workdir: Path
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, port: int, *args: str) -> None:
        binary = find_binary()
        if binary is None:
            raise RuntimeError("no redis-server binary")
        d = self.workdir / str(port)
        d.mkdir(exist_ok=True)
        log = (d / "log").open("wb")
        self.procs[port] = subprocess.Popen(
            [binary, *args], cwd=d, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
        try:
            _until(f"the server on port {port}", lambda: bool(client.ping()), 15)
        finally:
            client.close()

    def kill(self, port: int) -> None:
        """SIGKILL one server (a crash: no shutdown handshake)."""
        proc = self.procs[port]
        proc.kill()
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        self.procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _node_args(port: int) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]


@dataclass
class Cluster:
    servers: Servers
    ports: list[int]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.ports[0], socket_timeout=5)

    def nodes(self) -> list[dict[str, str]]:
        """``CLUSTER NODES`` as seen from a live node: id, addr, flags, master (id or -)."""
        for port in self.ports:
            if port not in self.servers.procs or self.servers.procs[port].poll() is not None:
                continue
            raw = redis.Redis(port=port, socket_timeout=2, decode_responses=True).execute_command(
                "CLUSTER NODES"
            )
            return [
                {
                    "id": n["node_id"],
                    "addr": addr.split("@")[0],
                    "flags": n["flags"],
                    "master": n["master_id"],
                }
                for addr, n in raw.items()
            ]
        raise RuntimeError("no live cluster node")

    def crossslot_errors(self) -> int:
        """CROSSSLOT errors the live nodes have replied since they started."""
        total = 0
        for port, proc in self.servers.procs.items():
            if proc.poll() is None:
                stats = redis.Redis(port=port, socket_timeout=2).info("errorstats")
                total += int(stats.get("errorstat_CROSSSLOT", {}).get("count", 0))
        return total

    def stop(self) -> None:
        self.servers.stop()


def _cluster_ok(ports: list[int], size: int) -> bool:
    for port in ports:
        info = redis.Redis(port=port, socket_timeout=2).cluster("info")
        if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) < size:
            return False
        if int(info.get("cluster_slots_ok", 0)) != 16384:
            return False
    return True


def start_cluster(masters: int = 3, replicas: int = 1, node_timeout_ms: int = 5000) -> Cluster:
    """A Redis Cluster of ``masters`` masters with ``replicas`` replicas each."""
    servers = Servers(Path(tempfile.mkdtemp(prefix="zqueue-cluster-")))
    atexit.register(servers.stop)
    try:
        ports = [free_port() for _ in range(masters * (1 + replicas))]
        for port in ports:
            servers.spawn(
                port,
                *_node_args(port),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(node_timeout_ms),
                # the bus port defaults to port + 10000, which may not exist: pick one
                "--cluster-port",
                str(free_port()),
            )
        if masters == 1 and replicas == 0:
            # redis-cli wants 3 masters; one node takes every slot by itself
            redis.Redis(port=ports[0]).execute_command("CLUSTER ADDSLOTSRANGE", 0, 16383)
        else:
            subprocess.run(
                [
                    _cli(),
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{p}" for p in ports),
                    "--cluster-replicas",
                    str(replicas),
                    "--cluster-yes",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=60,
            )
        _until("the cluster to be ok on every node", lambda: _cluster_ok(ports, len(ports)), 120)
        if replicas:
            cluster = Cluster(servers, ports)

            def replicas_synced() -> bool:
                found = [n for n in cluster.nodes() if "slave" in n["flags"]]
                return len(found) == masters * replicas and all(
                    redis.Redis(port=int(n["addr"].rsplit(":", 1)[1]), socket_timeout=2)
                    .info("replication")
                    .get("master_link_status")
                    == "up"
                    for n in found
                )

            _until("every replica to sync", replicas_synced, 60)
        return Cluster(servers, ports)
    except BaseException:
        servers.stop()
        raise


@dataclass
class SentinelSetup:
    servers: Servers
    master_port: int
    replica_port: int
    sentinel_ports: list[int]
    service: str = "zqmaster"

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def current_master(self) -> tuple[str, int]:
        for port in self.sentinel_ports:
            try:
                host, p = redis.Redis(
                    port=port, socket_timeout=2, decode_responses=True
                ).sentinel_get_master_addr_by_name(self.service)
                return str(host), int(p)
            except redis.RedisError:
                continue
        raise RuntimeError("no sentinel answers")

    def stop(self) -> None:
        self.servers.stop()


def start_sentinel(down_after_ms: int = 1000, failover_timeout_ms: int = 5000) -> SentinelSetup:
    """A master, one replica and three sentinels watching them (quorum 2)."""
    servers = Servers(Path(tempfile.mkdtemp(prefix="zqueue-sentinel-")))
    atexit.register(servers.stop)
    try:
        master, replica = free_port(), free_port()
        servers.spawn(master, *_node_args(master))
        servers.spawn(replica, *_node_args(replica), "--replicaof", "127.0.0.1", str(master))
        _until(
            "the replica to sync",
            lambda: (
                redis.Redis(port=replica, socket_timeout=2)
                .info("replication")
                .get("master_link_status")
                == "up"
            ),
            30,
        )
        setup = SentinelSetup(servers, master, replica, [])
        for _ in range(3):
            port = free_port()
            conf = servers.workdir / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\n"
                f"sentinel monitor {setup.service} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {setup.service} {down_after_ms}\n"
                f"sentinel failover-timeout {setup.service} {failover_timeout_ms}\n"
                f"sentinel parallel-syncs {setup.service} 1\n"
            )
            servers.spawn(port, str(conf), "--sentinel")
            setup.sentinel_ports.append(port)

        def sentinels_agree() -> bool:
            for port in setup.sentinel_ports:
                state = redis.Redis(port=port, socket_timeout=2).sentinel_master(setup.service)
                if int(state.get("num-other-sentinels", 0)) < 2 or int(state["num-slaves"]) < 1:
                    return False
            return True

        _until("the sentinels to see each other and the replica", sentinels_agree, 60)
        return setup
    except BaseException:
        servers.stop()
        raise
