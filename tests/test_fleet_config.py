"""The ``[fleet]`` table and ``CLAUDEGUARD_FLEET_URL``: every mistake is one line that says where
(file:line through the loader's ``where``); the credential comes only from an environment
variable or a 0600 file of ours, and shows in no repr, description or error; ``doctor``'s
clear-text warning; the optional extra; nothing outside the fleet package imports redis."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import claudeguard
from claudeguard.errors import ConfigError, GuardError
from claudeguard.fleet.config import fleet_settings, secret_env_names, url_warning
from claudeguard.fleet.keys import machine_label

SECRET = "s3cr3t-fleet-password"


def where(path):
    return f"cfg.toml:{len(path) + 5}"  # a stand-in for the loader's Layer.where: "file:line"


def settings(table=None, env=None, **kw):
    return fleet_settings(table, where=where, environ=env or {}, **kw)


def test_no_table_and_no_env_is_no_fleet():
    assert settings(None) is None


def test_the_env_url_alone_turns_the_fleet_on_with_its_defaults():
    cfg = settings(None, {"CLAUDEGUARD_FLEET_URL": "rediss://cg-ci7@redis.internal:6380/2"}, hostname="ci7.example.com")
    assert (cfg.tls, cfg.host, cfg.port, cfg.db, cfg.username) == (True, "redis.internal", 6380, 2, "cg-ci7")
    assert (cfg.machine, cfg.prefix, cfg.password_env, cfg.password_file) == (
        "ci7.example.com", "claudeguard", "CLAUDEGUARD_FLEET_PASSWORD", None)
    assert cfg.url_source == "env CLAUDEGUARD_FLEET_URL"
    assert cfg.describe() == "rediss://redis.internal:6380/2 as cg-ci7 (machine ci7.example.com, prefix claudeguard)"


def test_the_env_url_overrides_the_table():
    cfg = settings({"url": "redis://127.0.0.1/0", "machine": "m1"}, {"CLAUDEGUARD_FLEET_URL": "rediss://other:7000"})
    assert (cfg.host, cfg.port, cfg.tls, cfg.machine) == ("other", 7000, True, "m1")


@pytest.mark.parametrize("table, error", [
    ({"machine": "m"}, "cfg.toml:6: [fleet] needs url = \"rediss://host:port/db\" (or CLAUDEGUARD_FLEET_URL)"),
    ({"url": "http://h"}, "cfg.toml:7: fleet.url 'http://h': expected redis:// or rediss:// (TLS)"),
    ({"url": "redis://h?ssl=1"}, "cfg.toml:7: fleet.url 'redis://h?ssl=1': no ?query or #fragment"),
    ({"url": "redis://h/x"}, "cfg.toml:7: fleet.url 'redis://h/x': the path is a database number (/0), not 'x'"),
    ({"url": "redis://h:99999"}, "cfg.toml:7: fleet.url 'redis://h:99999': Port out of range"),
    ({"url": "redis:///0"}, "cfg.toml:7: fleet.url 'redis:///0': no host"),
    ({"url": "redis://a:b@h"}, "cfg.toml:7: fleet.url holds a password; put it in fleet.password_env or "
                               "fleet.password_file (a URL ends up in argv, logs and `config show`)"),
    ({"url": "redis://u*x@h"}, "cfg.toml:7: fleet.url: user 'u*x'"),
    ({"url": "redis://u1@h", "username": "u2"}, "cfg.toml:7: fleet.username 'u2' differs from the user in the URL"),
    ({"url": "redis://h", "colour": "red"}, "cfg.toml:7: unknown key 'fleet.colour' (known here: url, username,"),
    ({"url": "redis://h", "machine": 7}, "cfg.toml:7: 'fleet.machine' must be a string, not int"),
    ({"url": "redis://h", "machine": "a:b"}, "cfg.toml:7: fleet.machine 'a:b': 1-64 letters"),
    ({"url": "redis://h", "machine": "a*"}, "cfg.toml:7: fleet.machine 'a*'"),
    ({"url": "redis://h", "machine": "x" * 65}, "cfg.toml:7: fleet.machine"),
    ({"url": "redis://h", "username": "bob:alice"}, "cfg.toml:7: fleet.username 'bob:alice': 1-64 letters"),
    ({"url": "redis://h", "username": "b[o]b"}, "cfg.toml:7: fleet.username 'b[o]b'"),
    ({"url": "redis://h", "prefix": "team:"}, "cfg.toml:7: fleet.prefix 'team:'"),
    ({"url": "redis://h", "prefix": "t?m"}, "cfg.toml:7: fleet.prefix 't?m'"),
    ({"url": "redis://h", "password_env": "X", "password_file": "/p"},
     "cfg.toml:7: give fleet.password_env or fleet.password_file, not both"),
    ({"url": "redis://h", "password_env": "MY-PASS"}, "cfg.toml:7: fleet.password_env 'MY-PASS' is not an environment"),
    ({"url": "redis://h", "password_file": "fleet.pw"},
     "cfg.toml:7: fleet.password_file 'fleet.pw' must be an absolute"),
    ({"url": "redis://h", "ca_file": "/etc/hostname"}, "cfg.toml:7: fleet.ca_file is for rediss:// (TLS)"),
    ({"url": "rediss://h", "ca_file": "/nonexistent/ca.pem"}, "cfg.toml:7: fleet.ca_file /nonexistent/ca.pem: no such"),
])
def test_each_mistake_is_one_line_saying_where(table, error):
    with pytest.raises(ConfigError) as err:
        settings(table)
    assert str(err.value).startswith(error), str(err.value)
    assert "\n" not in str(err.value)


def test_a_password_in_the_url_never_shows_in_the_error():
    for url in (f"redis://u:{SECRET}@h:1/0", f"rediss://:{SECRET}@h"):
        with pytest.raises(ConfigError) as err:
            settings({"url": url})
        assert SECRET not in str(err.value)
    with pytest.raises(ConfigError) as err:
        settings({"url": f"http://u:{SECRET}@h"})
    assert SECRET not in str(err.value)


def write(path: Path, text: str, mode: int) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def test_the_password_file_must_be_0600_ours_and_not_a_link(tmp_path):
    good = write(tmp_path / "good.pw", SECRET + "\n", 0o600)
    cfg = settings({"url": "redis://h", "password_file": str(good)})
    assert cfg.password() == SECRET
    loose = write(tmp_path / "loose.pw", SECRET, 0o640)
    with pytest.raises(GuardError) as err:
        settings({"url": "redis://h", "password_file": str(loose)}).password()
    assert str(err.value) == f"fleet.password_file {loose}: mode 0640; it must be 0600 (chmod 600 {loose})"
    link = tmp_path / "link.pw"
    link.symlink_to(good)
    with pytest.raises(GuardError, match=f"fleet.password_file {link}: Too many levels of symbolic links"):
        settings({"url": "redis://h", "password_file": str(link)}).password()
    empty = write(tmp_path / "empty.pw", "\n", 0o600)
    with pytest.raises(GuardError, match="empty"):
        settings({"url": "redis://h", "password_file": str(empty)}).password()
    with pytest.raises(GuardError, match="No such file"):
        settings({"url": "redis://h", "password_file": str(tmp_path / "missing")}).password()
    with pytest.raises(GuardError, match="not a regular file"):
        settings({"url": "redis://h", "password_file": str(tmp_path)}).password()
    if os.geteuid() == 0:  # only root can give a file away
        theirs = write(tmp_path / "theirs.pw", SECRET, 0o600)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(GuardError, match="owned by uid 65534, not by you"):
            settings({"url": "redis://h", "password_file": str(theirs)}).password()


def test_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_FLEET_PASSWORD", SECRET)
    assert settings({"url": "redis://h"}).password() == SECRET  # the default variable
    monkeypatch.delenv("CLAUDEGUARD_FLEET_PASSWORD")
    assert settings({"url": "redis://h"}).password() is None  # unset default: no AUTH
    cfg = settings({"url": "redis://h", "password_env": "TEAM_REDIS_PW"})
    with pytest.raises(GuardError, match=r"fleet.password_env: \$TEAM_REDIS_PW is not set"):
        cfg.password()
    monkeypatch.setenv("TEAM_REDIS_PW", SECRET)
    assert cfg.password() == SECRET
    assert secret_env_names(cfg) == ["CLAUDEGUARD_FLEET_PASSWORD", "CLAUDEGUARD_FLEET_APPROVER_PASSWORD",
                                     "TEAM_REDIS_PW"]


def test_the_desk_approver_is_read_like_the_member(tmp_path, monkeypatch):
    """``approver``: the ACL user the service's desk answers other machines' requests as; its
    password from a variable (default CLAUDEGUARD_FLEET_APPROVER_PASSWORD) or a 0600 file."""
    monkeypatch.setenv("CLAUDEGUARD_FLEET_PASSWORD", "member")
    monkeypatch.delenv("CLAUDEGUARD_FLEET_APPROVER_PASSWORD", raising=False)
    assert settings({"url": "redis://h", "username": "cg-m"}).approver is None
    cfg = settings({"url": "redis://h", "username": "cg-m", "approver": "cg-a-desk", "machine": "bravo"})
    approver = cfg.approver
    assert approver is not None and approver.acl_user == "cg-a-desk" and approver.machine == "bravo"
    assert approver.password() is None and cfg.password() == "member"  # its own variable, unset: no AUTH
    monkeypatch.setenv("CLAUDEGUARD_FLEET_APPROVER_PASSWORD", SECRET)
    assert approver.password() == SECRET
    assert secret_env_names(cfg) == ["CLAUDEGUARD_FLEET_PASSWORD", "CLAUDEGUARD_FLEET_APPROVER_PASSWORD"]
    named = settings({"url": "redis://h", "approver": "cg-a", "approver_password_env": "DESK_PW"})
    with pytest.raises(GuardError, match=r"^fleet.approver_password_env: \$DESK_PW is not set$"):
        named.approver.password()
    assert "DESK_PW" in secret_env_names(named)
    pw = tmp_path / "desk.pw"
    pw.write_text(SECRET + "\n")
    pw.chmod(0o644)
    filed = settings({"url": "redis://h", "approver": "cg-a", "approver_password_file": str(pw)})
    with pytest.raises(GuardError, match=r"^fleet.approver_password_file .*: mode 0644; it must be 0600"):
        filed.approver.password()
    pw.chmod(0o600)
    assert filed.approver.password() == SECRET and SECRET not in repr(filed.approver)
    for table, message in (
            ({"approver_password_env": "X"}, "fleet.approver_password_env without fleet.approver"),
            ({"approver": "a:b"}, "fleet.approver 'a:b': 1-64 letters"),
            ({"username": "cg-m", "approver": "cg-m"}, "is this machine's member user too"),
            ({"approver": "cg-a", "approver_password_env": "X", "approver_password_file": "/x"},
             "give fleet.approver_password_env or fleet.approver_password_file, not both"),
            ({"approver": "cg-a", "approver_password_file": "rel.pw"}, "must be an absolute path")):
        with pytest.raises(ConfigError, match=message):
            settings(dict(table, url="redis://h"))


def test_the_config_holds_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_FLEET_PASSWORD", SECRET)
    pw = write(tmp_path / "p.pw", SECRET, 0o600)
    for cfg in (settings({"url": "redis://u@h"}), settings({"url": "redis://u@h", "password_file": str(pw)})):
        assert SECRET not in repr(cfg) and SECRET not in cfg.describe()
        assert all(SECRET not in str(getattr(cfg, name)) for name in cfg.__slots__)


@pytest.mark.parametrize("url, warns", [
    ("redis://10.0.0.5:6379", True), ("redis://redis.internal", True), ("redis://127.0.0.1", False),
    ("redis://127.9.9.9", False), ("redis://localhost:6379/1", False), ("redis://[::1]:6379", False),
    ("rediss://redis.internal:6380", False), ("rediss://10.0.0.5", False),
])
def test_doctor_warns_about_clear_text_to_another_host(url, warns):
    warning = url_warning(settings({"url": url}))
    if warns:
        assert warning is not None and "redis://" in warning and "use rediss:// (TLS)" in warning
        assert warning.startswith("fleet.url (cfg.toml:7): redis:// to ")
    else:
        assert warning is None


def test_a_hostname_becomes_a_machine_label():
    assert machine_label("ci-runner-7.corp.example") == "ci-runner-7.corp.example"
    assert machine_label("weird host:name*") == "weird-host-name-"
    assert machine_label("x" * 80) == "x" * 64
    assert machine_label("") == "localhost"


def test_without_the_extra_the_fleet_is_one_line_naming_it():
    code = "import sys; sys.modules['redis'] = None\n" \
           "from claudeguard.errors import run_main\n" \
           "def main():\n    import claudeguard.fleet.client\n    return 0\n" \
           "sys.exit(run_main('claudeguardctl', main))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("claudeguardctl: the fleet needs the optional extra claudeguard[fleet] (the redis client): "
                           "pip install 'claudeguard[fleet]'\n")
    bare = subprocess.run([sys.executable, "-c", "import sys; sys.modules['redis'] = None; import claudeguard.fleet"],
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 1
    assert bare.stderr.splitlines()[-1] == ("claudeguard.fleet.FleetExtraMissing: the fleet needs the optional extra "
                                            "claudeguard[fleet] (the redis client): pip install 'claudeguard[fleet]'")


def test_nothing_outside_the_fleet_package_imports_redis():
    root = Path(claudeguard.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.is_relative_to(root / "fleet"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(name == "redis" or name.startswith("redis.") for name in names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
    # and inside it, only conn.py does
    inside = [p.name for p in (root / "fleet").glob("*.py") if "import redis" in p.read_text()
              or "from redis" in p.read_text()]
    assert inside == ["conn.py"]
