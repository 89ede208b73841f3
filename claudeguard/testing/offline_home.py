"""An isolated, dialog-free HOME for running the real Claude CLI offline against a scripted model.

``prepare_home`` writes the ``.claude.json`` state a first start would otherwise ask about
(onboarding, folder trust, the custom API key), and ``offline_env`` builds the environment that
points the CLI at a local model server and keeps it (and claudeguard's own files) inside the
test's directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# The CLI looks a key up by its last 20 characters (after trimming); the full key is kept too
# in case a version compares whole keys.
_KEY_SUFFIX = 20

# Environment that would leak the caller's own setup into the isolated run.
_SCRUB = (
    "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT",
    "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDEGUARD_CONFIG", "CLAUDEGUARD_PROFILE",
    "CLAUDEGUARD_CLAUDE", "CLAUDEGUARD_DISABLE", "CLAUDEGUARD_STALL_AFTER", "CLAUDEGUARD_ON_STALL",
    "CLAUDEGUARD_APPROVAL_TIMEOUT", "CLAUDEGUARD_REPORT", "CLAUDEGUARD_FAIL_ON", "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
)


def prepare_home(home: Path, *, cwd: Path, api_key: str) -> Path:
    """Create ``home`` with a ``.claude.json`` that skips every first-run dialog for ``cwd``.

    Returns the path of the written ``.claude.json``. Safe to call again (it rewrites the file).
    """
    home = Path(home)
    cwd = Path(cwd).resolve()
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    # A user's home has the CLI's session-env dir from earlier runs; a fresh one lets the CLI race
    # itself: its start-up clean-up removes an empty ~/.claude/session-env while the first Bash call
    # makes its session's dir in it, and that call fails "ENOENT: ... mkdir .../session-env/<id>"
    # (seen on 2.1.197 under load). A file in it keeps the dir from being empty.
    (home / ".claude" / "session-env").mkdir(exist_ok=True)
    (home / ".claude" / "session-env" / ".keep").touch()
    project = {
        "hasTrustDialogAccepted": True,
        "hasCompletedProjectOnboarding": True,
        "projectOnboardingSeenCount": 1,
        "allowedTools": [],
    }
    state = {
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "9.9.9",
        "numStartups": 1,
        "theme": "dark",
        "hasSeenTasksHint": True,
        "bypassPermissionsModeAccepted": False,
        "customApiKeyResponses": {"approved": sorted({api_key.strip()[-_KEY_SUFFIX:], api_key}), "rejected": []},
        "projects": {str(cwd): project},
    }
    path = home / ".claude.json"
    path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return path


def offline_env(home: Path, base_url: str, api_key: str, *, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a CLI run in ``home`` against the model server at ``base_url``.

    Starts from ``base`` (default: this process's environment) minus credentials and settings
    that would leak in, and puts XDG and claudeguard directories under ``home`` so nothing the
    run writes lands outside it.
    """
    home = Path(home)
    env = dict(os.environ if base is None else base)
    for name in _SCRUB:
        env.pop(name, None)
    runtime = home / ".runtime"
    tmp = home / "tmp"
    for d in (runtime, tmp):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    env.update({
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # Else a first run clones the official plugin marketplace from GitHub (git over https,
        # then ssh; `ssh -T git@github.com` first), which the traffic switch above does not stop
        # (2.1.197 to 2.1.332, seen with strace in `doctor --verify`'s runs).
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
        # The CLI keeps task output under $CLAUDE_CODE_TMPDIR (else the system temp dir).
        "TMPDIR": str(tmp),
        "CLAUDE_CODE_TMPDIR": str(tmp),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_RUNTIME_DIR": str(runtime),
        "CLAUDEGUARD_RUNTIME_DIR": str(runtime / "claudeguard"),
        "CLAUDEGUARD_LOG_DIR": str(home / ".local" / "state" / "claudeguard" / "log"),
        # Its state dir is thrown away with it: no background verification of the CLI for it
        # (plan/verified.py; require_verified_cli still refuses an unverified one).
        "CLAUDEGUARD_AUTO_VERIFY": "0",
        "TERM": env.get("TERM") or "xterm-256color",
    })
    return env
