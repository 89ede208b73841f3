"""A process inside a guarded session that serves the fleet's Redis port (bound while the real
Redis was down: a boxed command shares the host's network) gets no credentials and no say: the
fleet's connection asks who accepted it before AUTH (``fleet/conn.py``). The same server outside
every session is spoken to, AUTH first: the refusal is the check's doing, not the fake's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.testing.wait import wait_until

# A server that takes connections on a loopback port, answers "+OK" to every line it gets, and
# appends each connection's bytes (hex) to a file, one line per connection once it closes.
FAKE = r"""
import binascii, socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
print(srv.getsockname()[1], flush=True)
def serve(conn):
    got = b""
    conn.settimeout(10)
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            got += data
            conn.sendall(b"+OK\r\n" * data.count(b"\r\n"))
    except OSError:
        pass
    with open(sys.argv[1], "a") as fh:
        fh.write(binascii.hexlify(got).decode() + "\n")
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
SH = '"$@"; r=$?; exit $r'  # a child of the shell (no exec: the shell stays its parent)


def start_fake(tmp_path: Path, inside: bool) -> tuple[subprocess.Popen[str], int, Path]:
    seen = tmp_path / ("seen-inside" if inside else "seen-outside")
    argv = [sys.executable, "-c", FAKE, str(seen)]
    if inside:  # a shell whose executable is named `claude`: what it runs is inside a Claude Code tree
        claude = tmp_path / "bin" / "claude"
        claude.parent.mkdir(exist_ok=True)
        shutil.copy("/bin/sh", claude)
        argv = [str(claude), "-c", SH, "claude", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline()), seen


def stop(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, 9)
    proc.wait(10)


def client_for(tmp_path: Path, port: int):
    from claudeguard.fleet.client import FleetClient
    from claudeguard.fleet.config import fleet_settings

    secret = tmp_path / "password"
    secret.write_text("approver-secret-0123456789\n")
    secret.chmod(0o600)
    cfg = fleet_settings({"url": f"redis://127.0.0.1:{port}/0", "username": "cg-a-bob",
                          "password_file": str(secret), "machine": "desk-bob"})
    assert cfg is not None
    return FleetClient(cfg, io_timeout=5)


def test_a_fake_redis_inside_a_session_gets_no_credentials(tmp_path):
    from claudeguard.fleet.client import FleetError

    proc, port, seen = start_fake(tmp_path, inside=True)
    try:
        with client_for(tmp_path, port) as client, pytest.raises(FleetError) as refused:
            client.requests()
        text = str(refused.value)
        assert "\n" not in text
        assert f"refused the fleet's Redis at 127.0.0.1:{port}: pid " in text, text
        assert "runs inside guarded session claude pid " in text and text.endswith("no credentials were sent")
        # the fake saw one connection, closed without a byte: no AUTH, no password
        wait_until(lambda: seen.exists() and seen.read_text(), 60, "the fake's record of the connection")
        assert seen.read_text().splitlines() == [""]
    finally:
        stop(proc)


def test_the_same_server_outside_every_session_is_spoken_to_auth_first(tmp_path):
    proc, port, seen = start_fake(tmp_path, inside=False)
    try:
        with client_for(tmp_path, port) as client:
            try:
                client.requests()
            except Exception:  # noqa: BLE001 - "+OK" is no answer to a query; what was sent is the point
                pass
        wait_until(lambda: seen.exists() and seen.read_text(), 60, "the fake's record of the connection")
        first = bytes.fromhex(seen.read_text().splitlines()[0])
        assert first.startswith(b"*3\r\n$4\r\nAUTH\r\n$8\r\ncg-a-bob\r\n"), first[:60]
        assert b"approver-secret-0123456789" in first
    finally:
        stop(proc)


def test_a_loopback_server_that_never_accepts_cannot_be_placed(monkeypatch):
    import socket

    from claudeguard import tcp_owner

    monkeypatch.setattr(tcp_owner, "ACCEPT_WAIT_S", 0.3)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        with socket.create_connection(srv.getsockname()) as client:  # completed by the kernel, never accepted
            assert tcp_owner.server_inside_session(client) == (
                "the serving process cannot be identified (it has not accepted the connection)")
            assert tcp_owner.server_inside_session(client, unseen_ok=True) is None  # TLS vouches instead
            accepted, _ = srv.accept()
            with accepted:  # accepted by this process: outside every session
                assert tcp_owner.server_inside_session(client) is None
    finally:
        srv.close()
