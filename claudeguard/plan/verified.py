"""Which real CLIs passed ``claudeguardctl doctor --verify`` on this machine (issue 26).

Two files in the user's state dir (``paths.state_dir_text``, a 0700 dir), each 0600 and replaced
whole (``files.write_atomic``):

- ``verified-cli.json``, the record: one entry per binary, by its SHA-256, with the CLI version,
  the result (``ok`` and every check), when, and how long it took. Written by the verifying
  process alone (``commands/verify.py``), never by a launcher, the service or a hook; a record
  that is not a regular file of this user with no group or other write bit is not believed.
- ``cli-hashes.json``, the hash cache: each binary's SHA-256 (and version) by its resolved path,
  keyed by what ``stat`` says of it (device, inode, size, mtime, ctime). The binary is 250-400 MB
  (~2 s to hash), so a guarded run never hashes it; a binary replaced, rebuilt or touched has
  another key, is hashed again, and is verified again when its hash is new.

A guarded run looks its CLI up (``check``, from ``plan.session.load_checked``): a stat and two
small JSON files (bench/verified_lookup.py). An unverified CLI gets one stderr line, and the
launcher names it when it registers its session with the resident service, which starts the
verification in the background (``service/verify.py``, one at a time per binary) for a launcher
that runs outside every guarded session: never from a file or message an agent could leave, so no
agent has the service run a program of its choosing outside its session; ``[security] require_verified_cli`` (lockdown
implies it) refuses it instead, exit 2, before anything starts.

What this does not stop: a process of the same user outside a sandbox can write both files (or
run anything else); the record keeps a careless or compromised agent from marking a version
verified only where the agent's tools cannot write the state dir (docs/design.md, "Verified
CLIs").

Only ``os`` and ``json`` (``hashlib`` where a hash is computed): the session's start path.
"""

from __future__ import annotations

import json
import os
import sys

from claudeguard.errors import GuardError, UsageError
from claudeguard.switches import service_on

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import TypedDict

    from claudeguard.config.load import Config

    class CheckResult(TypedDict, total=False):
        """One check of ``doctor --verify`` (``--json``'s ``checks``)."""

        name: str  # deny-main, deny-subagent, deny-background, ask-channel, silencing-refused, ...
        ok: bool
        detail: str
        skipped: bool  # not applicable here (said in ``detail``); counts as ok

    class Record(TypedDict, total=False):
        """One verified (or failed) binary in ``verified-cli.json``."""

        cli_version: str | None
        sha256: str
        ok: bool
        checks: list[CheckResult]
        path: str  # where it was when verified
        verified_at: str  # ISO 8601 UTC
        duration_s: float
        claudeguard: str  # the verifying claudeguard's version

    class Cached(TypedDict):
        """One binary in ``cli-hashes.json``."""

        key: list[int]  # device, inode, size, mtime_ns, ctime_ns
        sha256: str
        cli_version: str | None

RECORD_FILE = "verified-cli.json"
HASH_FILE = "cli-hashes.json"
VERIFY_COMMAND = "claudeguardctl doctor --verify"
# "0": a guarded run of a CLI that is not verified says nothing and asks for no background
# verification (an isolated HOME whose state dir is thrown away: the tests, the demo, the
# verification's own runs); `require_verified_cli` still refuses it.
AUTO_VAR = "CLAUDEGUARD_AUTO_VERIFY"

VERIFIED = "verified"
FAILED = "failed"
UNVERIFIED = "unverified"  # its hash is known, and no verification of it is recorded
UNKNOWN = "unknown"  # its hash is not cached (a new or changed binary) and was not computed


def state_path(name: str) -> str:
    from claudeguard.paths import state_dir_text

    return os.path.join(state_dir_text(), name)


def stat_key(path: str) -> list[int] | None:
    """What ``stat`` says of the binary at ``path`` (resolved): a cached hash holds while this does."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def sha256_file(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def _read(name: str) -> dict[str, object]:
    """A state file's JSON object; empty when it is missing, unreadable, a link, not JSON, or not
    a regular file of ours that only we can write (then nobody else's record is believed)."""
    try:
        fd = os.open(state_path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or not (st.st_mode & 0o170000) == 0o100000:
            return {}
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    finally:
        if fd >= 0:
            os.close(fd)
    return data if isinstance(data, dict) else {}


def _write(name: str, data: dict[str, object]) -> None:
    from claudeguard.files import write_atomic
    from claudeguard.paths import private_dir, state_dir_text

    private_dir(state_dir_text())
    write_atomic(state_path(name), json.dumps(data, indent=1, sort_keys=True) + "\n")


def cached(real: str) -> Cached | None:
    """The cached hash of the binary ``real`` resolves to, while its stat key still holds."""
    path = os.path.realpath(real)
    key = stat_key(path)
    entry = _read(HASH_FILE).get("paths")
    hit = entry.get(path) if isinstance(entry, dict) else None
    if key is None or not isinstance(hit, dict) or hit.get("key") != key or not isinstance(hit.get("sha256"), str):
        return None
    version = hit.get("cli_version")
    return {"key": key, "sha256": hit["sha256"], "cli_version": version if isinstance(version, str) else None}


def remember(real: str, key: list[int], sha256: str, cli_version: str | None) -> None:
    """Cache ``sha256`` for the binary ``real`` resolves to, under the stat ``key`` taken before it
    was hashed (a binary that changed meanwhile gets a key that no longer holds)."""
    path = os.path.realpath(real)
    data = _read(HASH_FILE)
    paths = data.get("paths")
    paths = {p: e for p, e in paths.items() if os.path.exists(p)} if isinstance(paths, dict) else {}
    paths[path] = {"key": key, "sha256": sha256, "cli_version": cli_version}
    _write(HASH_FILE, {"paths": paths})


def hash_of(real: str) -> tuple[str, list[int]] | None:
    """The binary's SHA-256, computed (never the cache) and cached, with the stat key it holds
    under; None when it cannot be read or changed while it was read."""
    path = os.path.realpath(real)
    key = stat_key(path)
    if key is None:
        return None
    try:
        sha = sha256_file(path)
    except OSError:
        return None
    if stat_key(path) != key:
        return None
    return sha, key


def records() -> dict[str, Record]:
    """Every recorded binary by its SHA-256."""
    found = _read(RECORD_FILE).get("binaries")
    out: dict[str, Record] = {}
    if isinstance(found, dict):
        for sha, rec in found.items():
            if isinstance(sha, str) and isinstance(rec, dict) and rec.get("sha256") == sha:
                out[sha] = rec  # type: ignore[assignment]  # a record as the verifier wrote it
    return out


KEEP_RECORDS = 32  # the newest verifications kept: the file stays small on the launcher's path


def save_record(record: Record) -> None:
    """Record one binary's verification (the verifying process only: ``commands/verify.py``)."""
    data = records()
    data[record["sha256"]] = record
    newest = sorted(data.values(), key=lambda r: str(r.get("verified_at") or ""), reverse=True)[:KEEP_RECORDS]
    _write(RECORD_FILE, {"binaries": {r["sha256"]: r for r in newest}})


class Status:
    """Where the CLI ``real`` stands (a plain class: the session's start path)."""

    __slots__ = ("real", "sha256", "version", "record")

    def __init__(self, real: str, sha256: str | None, version: str | None, record: Record | None) -> None:
        self.real = real
        self.sha256 = sha256
        self.version = version
        self.record = record

    @property
    def state(self) -> str:
        if self.record is not None:
            return VERIFIED if self.record.get("ok") is True else FAILED
        return UNVERIFIED if self.sha256 else UNKNOWN

    def failed_check(self) -> str:
        """The first failed check of a failed record, as ``name: detail``."""
        checks = self.record.get("checks", []) if self.record is not None else []
        bad = [c for c in checks if not c.get("ok")]
        return f"{bad[0].get('name')}: {bad[0].get('detail')}" if bad else "no check passed"


def lookup(real: str, *, compute: bool = False) -> Status:
    """The CLI's standing from the hash cache (``compute``: hash the binary when the cache does not
    hold, and cache it) and the record."""
    hit = cached(real)
    sha, version = (hit["sha256"], hit["cli_version"]) if hit is not None else (None, None)
    if sha is None and compute:
        from claudeguard.plan.cli_version import cli_version

        found = hash_of(real)
        if found is not None:
            sha, key = found
            version = cli_version(real)
            try:
                remember(real, key, sha, version)
            except (OSError, GuardError):
                pass  # an unwritable or unsafe state dir: hashed again next time
    if version is None:
        from claudeguard.plan.cli_version import cli_version

        version = cli_version(real)
    record = records().get(sha) if sha else None
    return Status(real, sha, version, record)


def check(cfg: Config, real: str) -> Status:
    """A guarded run's check of its CLI, before anything starts: a verified CLI passes silently;
    under ``[security] require_verified_cli`` (or lockdown) any other is refused (UsageError,
    exit 2); else one stderr line says so and the service is asked to verify it."""

    security = cfg.security()
    required = bool(cfg.lockdown.value) or security["require_verified_cli"]
    status = lookup(real, compute=required)
    state = status.state
    if state == VERIFIED:
        return status
    name = f"Claude Code {status.version or '(version unknown)'} ({real})"
    if required:
        why = (f"lockdown ({cfg.lockdown.source})" if cfg.lockdown.value
               else f"security.require_verified_cli ({cfg.source('security.require_verified_cli')})")
        said = (f"failed `{VERIFY_COMMAND}` on this machine ({status.failed_check()})" if state == FAILED
                else f"has not passed `{VERIFY_COMMAND}` on this machine")
        raise UsageError(f"{name} {said}: refused by {why}; run `{VERIFY_COMMAND}`")
    if os.environ.get(AUTO_VAR, "1") == "0":
        return status  # no line and no background verification (require_verified_cli still refuses, above)
    if state == FAILED:
        print(f"claudeguard: warning: {name} failed `{VERIFY_COMMAND}` on this machine ({status.failed_check()}); "
              "the guard may not hold with it", file=sys.stderr)
        return status
    if service_on():
        # The launcher names its CLI when it registers its session (``wants_verification``); the
        # service verifies it only for a launcher outside every guarded session (service/verify.py).
        print(f"claudeguard: {name} is not verified on this machine yet: the guard service verifies it in the "
              f"background (`claudeguardctl doctor` shows the result)", file=sys.stderr)
    else:
        print(f"claudeguard: {name} is not verified on this machine yet: run `{VERIFY_COMMAND}`", file=sys.stderr)
    return status


def wants_verification() -> bool:
    """Whether a launcher asks its service to verify its CLI in the background (the service
    looks the CLI up itself: nothing is started for a verified or failed one)."""
    return os.environ.get(AUTO_VAR, "1") != "0"
