"""``claudeguardctl config show|path|init|trust|untrust``: the effective config with the source of
every value, the files searched, a commented starter file, and the user's trust in a project's
files (config/trust.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from claudeguard.commands.cli import Parser, parser as command_parser
from claudeguard.config.load import Config, Sourced, env_overrides, load_config
from claudeguard.config.find import PROJECT_FILE, project_root
from claudeguard.config.trust import command_for, load as load_trust, record, revoke
from claudeguard.config.trust import key as trust_key
from claudeguard.config.write import write_starter
from claudeguard.errors import UsageError
from claudeguard.paths import user_config_file
from claudeguard.plan.repo_code import trust_candidates
from claudeguard.procs import inside_guarded_session


def main(argv: list[str]) -> int:
    parser = command_parser("config")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{show,path,init,trust,untrust}",
                                parser_class=Parser)
    show = sub.add_parser("show", help="every effective value and the file:line (or option, or default) it came from",
                          description="Print every effective config value and the file:line, option or "
                                      "default it came from.")
    show.add_argument("--profile", metavar="NAME",
                      help="apply [profiles.NAME] as `claudeguard --guard-profile NAME` would")
    show.add_argument("--json", action="store_true", help="one JSON object: key -> {value, source}")
    sub.add_parser("path", help="the config files searched, in order, and which exist",
                   description="List the config files searched, in order (later ones win), and which exist.")
    init = sub.add_parser("init", help="write a commented starter config (never overwrites a file)",
                          description="Write a commented starter config; an existing file is never overwritten.")
    init.add_argument("--project", action="store_true", help="write ./.claudeguard.toml instead of the user file")
    init.add_argument("--file", help="write this file")
    trust = sub.add_parser("trust", help="trust the exact content of a project's config and code (path + SHA-256)",
                           description="Record the exact content (path + SHA-256, in your state dir) of a "
                                       "project file so that its loosening applies and its code runs: a "
                                       ".claudeguard.toml (allow rules, a looser mode, replace), Claude Code "
                                       "settings with hooks, statusLine or apiKeyHelper, .mcp.json servers, "
                                       "agent files with hooks or permissionMode, a plugin dir. Without FILE: "
                                       "every such file that applies in the current directory. A changed file "
                                       "is untrusted again. Refused from inside a guarded session.")
    trust.add_argument("files", nargs="*", metavar="FILE", help="the files (or plugin dirs) to trust")
    untrust = sub.add_parser("untrust", help="forget your trust in a file: its loosening, its code and its "
                                             "trusted rules no longer apply",
                             description="Forget the trust recorded for each FILE (default: every trusted "
                                         "project file that applies in the current directory, changed, "
                                         "removed or not): its loosening no longer applies, its code no longer "
                                         "runs, and the deny and ask rules of a trusted config that was changed "
                                         "or removed stop binding. Refused from inside a guarded session.")
    untrust.add_argument("files", nargs="*", metavar="FILE", help="the files (or plugin dirs) to forget")
    args = parser.parse_args(argv[1:])

    if args.action == "trust":
        return _trust(args.files)
    if args.action == "untrust":
        return _untrust(args.files)

    if args.action == "init":
        path = Path(args.file) if args.file else Path(".claudeguard.toml") if args.project else user_config_file()
        write_starter(path)
        print(f"wrote {path}")
        return 0
    overrides = env_overrides()
    if getattr(args, "profile", None):
        overrides.profile = Sourced(args.profile, "--profile")
    cfg = load_config(Path.cwd(), overrides)
    if args.action == "path":
        for layer, path, exists in cfg.searched:
            print(f"{layer:20} {path}{'' if exists else '  (not found)'}")
        return 0
    if args.json:
        out = {
            "values": {k: {"value": v.value, "source": v.source} for k, v in sorted(cfg.values.items())},
            "rules": {k: [{"rule": r.rule, "source": r.source} for r in v] for k, v in sorted(cfg.rules.items())},
            "profile": cfg.profile,
            "files": [{"layer": n, "path": str(p), "exists": e} for n, p, e in cfg.searched],
            "trust": [{"layer": n, "path": p, "owner": o, "trusted": t} for n, p, o, t in cfg.layer_trust],
            "untrusted": [{"path": p, "ignored": what, "trust_command": command_for(p)} for p, what in cfg.untrusted],
            "binding": [note.removeprefix("claudeguard: ") for note in cfg.binding],
        }
        print(json.dumps(out, indent=2))
        return 0
    for layer, path, exists in cfg.searched:
        print(f"# {layer}: {path}{'' if exists else ' (not found)'}{_trust_note(cfg, str(path))}")
    for file, what in cfg.untrusted:
        print(f"# {file}: loosening ignored until trusted: {'; '.join(what)} ({command_for(file)})")
    for note in cfg.binding:
        print(f"# {note.removeprefix('claudeguard: ')}")
    if cfg.profile:
        print(f"# profile: {cfg.profile}")
    for key, value in sorted(cfg.values.items()):
        print(f"{key} = {value.value!r}    # {value.source}")
    for key, rules in sorted(cfg.rules.items()):
        for rule in rules:
            print(f"{key} += {rule.rule!r}    # {rule.source}")
    return 0


def _trust_note(cfg: Config, path: str) -> str:
    for _, p, owner, trusted in cfg.layer_trust:
        if p == path and owner == "project":
            return " (trusted)" if trusted else " (not trusted: may tighten, not loosen)"
    return ""


def _trust(files: list[str]) -> int:
    """``config trust [FILE...]``: record the files' content; never from inside a guarded session
    (its agent would trust what it just wrote)."""
    session = inside_guarded_session(os.getpid())
    if session is not None:
        raise UsageError(f"config trust is refused from inside guarded session {session}: trust a file from "
                         f"your own shell, outside any session")
    if not files:
        files = trust_candidates(os.getcwd())
        if not files:
            print("nothing to trust here: no project config, Claude Code settings with code, .mcp.json or agent "
                  "file with hooks")
            return 0
    for path, sha in record(files):
        print(f"trusted {path} (sha256 {sha})")
    return 0


def _untrust(files: list[str]) -> int:
    """``config untrust [FILE...]``: forget the records; never from inside a guarded session (its
    agent would lift the rules that bind it)."""
    session = inside_guarded_session(os.getpid())
    if session is not None:
        raise UsageError(f"config untrust is refused from inside guarded session {session}: do it from your own "
                         f"shell, outside any session")
    if not files:
        root = os.path.realpath(project_root(os.getcwd()))
        here = os.path.realpath(os.getcwd())
        files = [p for p in load_trust().files if p == os.path.join(root, PROJECT_FILE)
                 or p.startswith(root.rstrip("/") + "/")] if root != "/" else []
        files += [os.path.join(here, PROJECT_FILE)] if trust_key(os.path.join(here, PROJECT_FILE)) not in files else []
    gone = revoke(files)
    if not gone:
        print("nothing was trusted there")
        return 0
    for path in gone:
        print(f"no longer trusted: {path}")
    return 0
