"""The fleet under load, on loopback: 20 simulated machines with 25 waiting requests each.

    python bench/fleet.py [--machines 20] [--per-machine 25] [--answers 200] [--idle-seconds 60]

Starts a real redis-server (Debian package) in a temp dir with the roles' ACL users, and the
machines (``claudeguard.testing.fleet_machine``: a process each, with its own HOME and runtime
dir, real channel requests, a FleetLink with the default 2 s heartbeat). Measures:

- listing: ``FleetClient.requests()`` over all of them (in process, connected), and a fresh
  ``python`` process that imports the client, connects and lists (what ``pending --fleet``
  will cost, interpreter and redis-py imports included);
- an answer reaching its owner: from the approver's XADD to the owner's ``apply_answer`` call
  (both wall clocks of this host), and the approver's whole ``answer()`` (its listing of the
  owner's requests, the send, the verdict back);
- the idle link: CPU of a machine process with no request (the link alone: its heartbeat
  thread, its blocked XREAD), and of one with 25 requests waiting (plus the channel's waiters),
  over ``--idle-seconds``;
- the commands as a user runs them: ``claudeguardctl pending --fleet --json`` listing all of
  them (a fresh process: interpreter, config, redis-py, the listing);
- the idle guard service with the fleet on (``python -m claudeguard.service`` of a member's own
  HOME and config: its link, its sessions' heartbeat thread, no session), over ``--idle-seconds``.

Prints one JSON object; stops every process it started by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "bench"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median_ms": round(statistics.median(values) * 1000, 2),
            "p95_ms": round(percentile(values, 95) * 1000, 2), "p99_ms": round(percentile(values, 99) * 1000, 2),
            "max_ms": round(max(values) * 1000, 2)}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _home(root: Path, config: str) -> dict[str, str]:
    """The environment of a machine of its own under ``root``: HOME, config (``config`` as its
    user file), runtime and log dirs."""
    for sub in ("xdg/claudeguard", "run", "log"):
        (root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / "xdg" / "claudeguard" / "config.toml").write_text(config)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "XDG_CONFIG_HOME": str(root / "xdg"),
            "CLAUDEGUARD_RUNTIME_DIR": str(root / "run"), "CLAUDEGUARD_LOG_DIR": str(root / "log"),
            "CLAUDEGUARD_AUTO_VERIFY": "0"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--per-machine", type=int, default=25)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args()

    from claudeguard.fleet.client import FleetClient
    from claudeguard.fleet.config import fleet_settings
    from claudeguard.fleet.keys import approver_acl, member_acl
    from claudeguard.testing.fleet_machine import FleetMachine
    from claudeguard.testing.redis_server import RedisServer
    from claudeguard.testing.wait import wait_until

    out: dict[str, object] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "python": platform.python_version(), "load_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        server = RedisServer(root / "redis").start()
        machines: list[FleetMachine] = []
        try:
            admin = server.admin()
            out["redis"] = admin.info("server")["redis_version"]
            names = [f"m{i:02d}" for i in range(args.machines)]
            passwords = {name: os.urandom(12).hex() for name in names}
            for name in names:
                admin.execute_command(*member_acl(PREFIX, name, f"cg-{name}", ">" + passwords[name]).split())
            admin.execute_command(*approver_acl(PREFIX, "cg-desk", ">desk-pw").split())
            admin.execute_command(*member_acl(PREFIX, "host", "cg-host", ">host-pw").split())
            admin.close()
            pw = root / "desk.pw"
            fd = os.open(pw, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, b"desk-pw\n")
            os.close(fd)
            cfg = fleet_settings({"url": server.url, "username": "cg-desk", "password_file": str(pw),
                                  "machine": "desk", "prefix": PREFIX}, environ={})
            assert cfg is not None

            started = time.monotonic()
            for name in names:
                machines.append(FleetMachine(root / "machines", name, url=server.url, username=f"cg-{name}",
                                             password=passwords[name], prefix=PREFIX, heartbeat_s=2.0))
            for m in machines:
                m.send({"op": "post", "tag": "load", "n": args.per_machine, "timeout": 900, "tool": "Bash",
                        "input": {"command": f"make deploy-{m.name}"}, "kind": "permission", "choices": None})
            total = args.machines * args.per_machine
            client = FleetClient(cfg)
            wait_until(lambda: len(client.requests()) == total, 120, f"{total} requests listed", interval=0.2)
            out["setup_s"] = round(time.monotonic() - started, 1)

            # -- listing ----------------------------------------------------------------------------
            times = []
            for _ in range(30):
                t0 = time.perf_counter()
                listed = client.requests()
                times.append(time.perf_counter() - t0)
                assert len(listed) == total
            out["list_in_process"] = summary(times)
            table = {"url": server.url, "username": "cg-desk", "password_file": str(pw), "machine": "desk",
                     "prefix": PREFIX}
            code = ("from claudeguard.fleet.config import fleet_settings\n"
                    "from claudeguard.fleet.client import FleetClient\n"
                    f"cfg = fleet_settings({table!r}, environ={{}})\n"
                    "print(len(FleetClient(cfg).requests()))\n")
            fresh = []
            for _ in range(7):
                t0 = time.perf_counter()
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
                fresh.append(time.perf_counter() - t0)
                assert proc.stdout.strip() == str(total), proc.stderr
            bare = []
            for _ in range(7):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
                bare.append(time.perf_counter() - t0)
            out["list_fresh_process"] = summary(fresh)
            out["python_c_pass"] = summary(bare)
            approver = _home(root / "approver", f'[fleet]\nurl = "{server.url}"\nusername = "cg-desk"\n'
                                                f'password_file = "{pw}"\nmachine = "desk"\nprefix = "{PREFIX}"\n')
            command = []
            for _ in range(7):
                t0 = time.perf_counter()
                argv = [sys.executable, "-m", "claudeguard.commands.ctl", "pending", "--fleet", "--json"]
                proc = subprocess.run(argv, env=approver, capture_output=True, text=True, timeout=60)
                command.append(time.perf_counter() - t0)
                assert proc.returncode == 0 and len(json.loads(proc.stdout)) == total, proc.stderr
            out["pending_fleet_command"] = summary(command)

            # The same command where this machine's guard service runs with `[fleet] approver`: it
            # lists on its kept connection (commands/fleet_cli.listed_by_service), no redis-py here.
            host_pw = root / "host.pw"
            fd = os.open(host_pw, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, b"host-pw\n")
            os.close(fd)
            host = _home(root / "host", f'[fleet]\nurl = "{server.url}"\nusername = "cg-host"\n'
                                        f'password_file = "{host_pw}"\nmachine = "host"\nprefix = "{PREFIX}"\n'
                                        f'approver = "cg-desk"\napprover_password_file = "{pw}"\n')
            ctl = [sys.executable, "-m", "claudeguard.commands.ctl"]
            subprocess.run([*ctl, "desk"], env=host, capture_output=True, text=True, timeout=60, check=True)
            try:
                deadline = time.monotonic() + 20
                while "fleet_desk" not in json.loads(subprocess.run([*ctl, "service", "status", "--json"], env=host,
                                                                    capture_output=True, text=True,
                                                                    timeout=60).stdout):
                    assert time.monotonic() < deadline, "the service's fleet did not start"
                    time.sleep(0.1)
                served = []
                for _ in range(8):
                    t0 = time.perf_counter()
                    proc = subprocess.run([*ctl, "pending", "--fleet", "--json"], env=host, capture_output=True,
                                          text=True, timeout=60)
                    served.append(time.perf_counter() - t0)
                    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == total, proc.stderr
                out["pending_fleet_command_via_service"] = summary(served[1:])  # the first connects
            finally:
                subprocess.run([*ctl, "service", "stop"], env=host, capture_output=True, timeout=60)

            # -- answers ----------------------------------------------------------------------------
            reach, round_trip = [], []
            by_machine = {m.name: m for m in machines}
            groups: dict[str, list] = {}
            for view in client.requests():
                groups.setdefault(view["machine"], []).append(view)
            for k in range(min(args.answers, total)):
                view = groups[names[k % len(names)]][k // len(names)]  # round-robin over the machines
                owner = by_machine[view["machine"]]
                t0 = time.perf_counter()
                verdict = client.answer(view["id"], "allow", machine=view["machine"])
                round_trip.append(time.perf_counter() - t0)
                assert verdict["applied"]
                [applied] = owner.wait_for(lambda e, rid=view["id"]: e["ev"] == "applied" and e["id"] == rid, 10,
                                           "applied")
                assert client.sent_at is not None
                reach.append(applied["t"] - client.sent_at)
            out["answer_reaches_owner"] = summary(reach)
            out["answer_round_trip"] = summary(round_trip)
            out["answered"] = len(reach)
            client.close()

            # -- idle ---------------------------------------------------------------------------------
            for m in machines:
                m.stop()
            machines.clear()
            quiet = FleetMachine(root / "idle", names[0], url=server.url, username=f"cg-{names[0]}",
                                 password=passwords[names[0]], prefix=PREFIX, heartbeat_s=2.0)
            loaded = FleetMachine(root / "idle", names[1], url=server.url, username=f"cg-{names[1]}",
                                  password=passwords[names[1]], prefix=PREFIX, heartbeat_s=2.0)
            machines += [quiet, loaded]
            loaded.send({"op": "post", "tag": "idle", "n": args.per_machine, "timeout": 900, "tool": "Bash",
                         "input": {"command": "idle"}, "kind": "permission", "choices": None})
            loaded.wait_for(lambda e: e["ev"] == "posted", 30, "posted", args.per_machine)
            time.sleep(3)  # past their start-up
            before = {m.name: cpu_seconds(m.proc.pid) for m in machines}
            connects = list(machines)
            t0 = time.monotonic()
            time.sleep(args.idle_seconds)
            elapsed = time.monotonic() - t0
            out["idle_link_cpu_percent"] = round((cpu_seconds(quiet.proc.pid) - before[quiet.name]) / elapsed * 100, 3)
            out["idle_with_25_waiting_cpu_percent"] = round(
                (cpu_seconds(loaded.proc.pid) - before[loaded.name]) / elapsed * 100, 3)
            for m in connects:  # a link that kept failing (and reconnecting) would not be idle
                m.send({"op": "status"})
                [status] = m.wait_for(lambda e: e["ev"] == "status", 10, "status")
                assert status["failures"] == 0 and status["connected"] == {"pub": True, "inbox": True}, status
            out["idle_seconds"] = round(elapsed, 1)

            # -- the idle service with the fleet on -------------------------------------------------------
            member = _home(root / "service", f'[fleet]\nurl = "{server.url}"\nusername = "cg-{names[2]}"\n'
                                             f'machine = "{names[2]}"\nprefix = "{PREFIX}"\n')
            member["CLAUDEGUARD_FLEET_PASSWORD"] = passwords[names[2]]
            member["CLAUDEGUARD_SERVICE_IDLE"] = str(args.idle_seconds + 60)
            service = subprocess.Popen([sys.executable, "-m", "claudeguard.service"], env=member,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                watcher = FleetClient(cfg)
                wait_until(lambda: any(n == names[2] and r["alive"] for r in watcher.ps() for n in [r["machine"]]),
                           30, "the service's heartbeat")
                watcher.close()
                time.sleep(3)
                before_service = cpu_seconds(service.pid)
                t0 = time.monotonic()
                time.sleep(args.idle_seconds)
                out["idle_service_with_fleet_cpu_percent"] = round(
                    (cpu_seconds(service.pid) - before_service) / (time.monotonic() - t0) * 100, 3)
            finally:
                service.terminate()
                try:
                    service.wait(10)
                except subprocess.TimeoutExpired:
                    service.kill()
                    service.wait(10)
        finally:
            for m in machines:
                m.stop()
            server.stop()
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
