"""Security: no pickle, tasks resolved by registry only, a least-privilege Redis ACL user,
TLS. (The admin's access rules, CSRF, methods and hidden payloads: test_admin.py.)"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.worker import Worker
from testproject.demo import tasks

from .redis_private import PrivateRedis

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_zqueue"

UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve"}


def test_no_pickle_or_eval_anywhere_in_the_package() -> None:
    """Payloads are JSON; nothing in the package can unpickle, unmarshal or eval."""
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    found = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("eval", "exec", "__import__")
            ):
                found.append(f"{path.name}:{node.lineno} {node.func.id}()")
            found += [f"{path.name}:{node.lineno} import {n}" for n in names if n in UNSAFE_MODULES]
    assert found == []


def test_a_task_is_resolved_by_the_registry_only(project: dict[str, str], tmp_path: Path) -> None:
    """A payload naming an importable function that is not a registered task (here
    os.system, and a private helper of a tasks module) is a dead letter, never called."""
    q = get_queue("default")
    marker = tmp_path / "owned"
    evil = q.publish({"task": "os.system", "args": [f"touch {marker}"], "kwargs": {}})
    helper = q.publish(
        {"task": "testproject.demo.tasks._ledger", "args": [str(marker), "x"], "kwargs": {}}
    )
    w = Worker(["default"], burst=True, scan_interval=0.05)
    w.run()
    assert w.failed == 2 and not marker.exists()
    for tag in (evil, helper):
        info = q.info(tag)
        assert info is not None and info.state == "dead"
        assert "unknown task" in (info.last_error or "")


# ------------------------------------------------------------------ ACL

#: The ACL rule set documented in docs/operations.md ("A Redis user for django_zqueue"),
#: with the key prefix filled in.
ACL_RULES = [
    "resetkeys",
    "resetchannels",
    "-@all",
    "+@read",
    "+@write",
    "-@dangerous",
    "+fcall",
    "+fcall_ro",
    "+function|load",
    "-function|flush",
    "-function|delete",
    "-function|restore",
    "+evalsha",
    "+eval",
    "+script|load",
    "+script|exists",
    "+time",
    "+ping",
    "+info",
    "+blpop",
    "+multi",
    "+exec",
    "+discard",
    "+hello",
    "+auth",
    "+client|setname",
    "+client|id",
]


def acl_user(server: PrivateRedis, prefix: str) -> str:
    """Create user zq (password zq-secret) limited to keys of ``prefix``; its URL."""
    admin = server.client()
    admin.execute_command(
        "ACL", "SETUSER", "zq", "reset", "on", ">zq-secret", *ACL_RULES, f"~{{{prefix}:*"
    )
    return f"redis://zq:zq-secret@127.0.0.1:{server.port}/0"


def test_acl_user_limited_to_its_prefix_runs_everything(tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path / "acl")
    prefix = "zqacl"
    url = acl_user(server, prefix)
    value = {
        "REDIS_URL": url,
        "PREFIX": prefix,
        "QUEUES": {"default": {"visibility_timeout": 60}},
        "CONNECTION_OPTIONS": {"client_name": "zq-acl"},
    }
    ledger = tmp_path / "ledger"
    try:
        with override_settings(ZQUEUE=value):
            try:
                q = get_queue("default")
                # producer and consumer API
                tag = q.publish({"x": 1})
                msg = q.get()
                assert msg is not None and msg.tag == tag and q.ack(msg)
                for i in range(5):
                    tasks.record.enqueue(str(ledger), i)
                # a worker (with its scanner, heartbeat and registration)
                w = Worker(["default"], burst=True, scan_interval=0.05)
                w.run()
                assert w.processed == 5 and q.total_count() == 0
                assert len(ledger.read_text().splitlines()) == 5
                # the scanner: recovers an expired lease
                q.publish("lost", tag="lost")
                lost = q.get()
                assert lost is not None and lost.tag == "lost"
                server.client().zadd(q.engine._keys.leased, {"lost": 0}, xx=True)
                assert q.scan().recovered == 1
                # a dead letter
                q.publish("doomed", tag="doomed", priority=5)
                doomed = q.get()
                assert doomed is not None and doomed.tag == "doomed"
                assert q.nack(doomed, "no", dead=True)
                # admin reads (what the dashboard shows) and dead-letter actions
                assert q.counts()["dead"] == 1 and q.stats()["acked"] == 6
                assert q.minutes(5) and q.live_threads() >= 0
                [dead] = q.dead_letters()
                assert q.info(dead.tag) is not None and q.rank("lost") == 0
                assert q.requeue_dead(dead.tag) and q.delete(dead.tag)
                from django_zqueue.admin import dashboard

                [summary] = dashboard.overview([q])
                assert summary is not None
                for state in ("ready", "delayed", "leased", "dead"):
                    assert dashboard.page(q, state, payload=True) is not None
                # the deploy check may read INFO
                from django_zqueue.ops.checks import eviction_warning

                assert eviction_warning(q.engine._client) is None
                # outside the prefix: refused
                c = q.engine._client
                with pytest.raises(redis.exceptions.NoPermissionError):
                    c.set("other:key", "x")
                with pytest.raises(redis.exceptions.NoPermissionError):
                    c.get("{zqother:default}:ready")
                with pytest.raises(redis.exceptions.NoPermissionError):
                    c.flushall()
                with pytest.raises(redis.exceptions.NoPermissionError):
                    c.config_get("*")
                with pytest.raises(redis.exceptions.NoPermissionError):
                    c.keys("*")
                # the library can be loaded, not flushed or deleted
                for sub in (("FLUSH",), ("DELETE", q.engine._scripts.library.name)):
                    with pytest.raises(redis.exceptions.NoPermissionError):
                        c.execute_command("FUNCTION", *sub)
            finally:
                conf.reset()
        # a worker process and the scanner command through the ACL user too
        env = {
            **os.environ,
            "ZQUEUE_REDIS_URL": url,
            "ZQUEUE_PREFIX": prefix,
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "testproject.settings",
        }
        manage = str(ROOT / "testproject" / "manage.py")
        for args in (["zqueue_worker", "--burst"], ["zqueue_scanner", "--once"], ["zqueue_stats"]):
            out = subprocess.run(
                [sys.executable, manage, *args], env=env, capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 0, (args, out.stderr)
            assert "NOPERM" not in out.stderr, (args, out.stderr)
    finally:
        server.stop()


# ------------------------------------------------------------------ TLS


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls(tmp_path: Path) -> None:
    import shutil

    from django_zqueue.engine.redis.embedded import free_port

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed to make a certificate)")
    cert, key = _certificate(tmp_path)
    port = free_port()
    try:
        server = PrivateRedis(
            tmp_path / "tls",
            "--port", "0", "--tls-port", str(port),
            "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
            port=port,
            tls_ca=cert,
        )  # fmt: skip
    except RuntimeError as exc:
        pytest.skip(f"this redis-server has no TLS support: {exc}")
    url = f"rediss://127.0.0.1:{port}/0"
    prefix = "zqtls"
    ledger = tmp_path / "ledger"

    def settings(**options: Any) -> dict[str, Any]:
        return {
            "REDIS_URL": url,
            "PREFIX": prefix,
            "QUEUES": {"default": {}},
            "SOCKET_TIMEOUT": 2,
            "SOCKET_CONNECT_TIMEOUT": 2,
            "CONNECTION_OPTIONS": options,
        }

    try:
        with override_settings(ZQUEUE=settings(ssl_ca_certs=str(cert))):
            try:
                q = get_queue("default")
                for i in range(3):
                    tasks.record.enqueue(str(ledger), i)
                w = Worker(["default"], burst=True, scan_interval=0.05)
                w.run()
                assert w.processed == 3 and q.total_count() == 0
                assert len(ledger.read_text().splitlines()) == 3
            finally:
                conf.reset()
        # the certificate is verified: an unknown CA is refused
        with override_settings(ZQUEUE=settings()):
            try:
                from django_zqueue import QueueUnavailable

                with pytest.raises(QueueUnavailable, match="certificate"):
                    get_queue("default").total_count()
            finally:
                conf.reset()
    finally:
        server.stop()


def test_arguments_stay_out_of_the_logs(
    project: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Job arguments may hold secrets: the worker's log lines name the job and task, not
    the arguments (the admin shows them only with view_payload: test_admin.py)."""
    import logging

    secret = "s3cr3t-api-token-4c2f"
    ledger = tmp_path / secret
    tasks.always_fails.enqueue(str(ledger))
    tasks.record.enqueue(str(tmp_path / "ok"), secret)
    with caplog.at_level(logging.DEBUG, logger="django_zqueue"):
        Worker(["default"], burst=True, scan_interval=0.05).run()
    assert ledger.exists()  # the jobs ran
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "event=job_failed" in text
    assert secret not in text
