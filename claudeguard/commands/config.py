"""``claudeguardctl config show|path|init``: the effective config with the source of every value,
the files searched, and a commented starter file."""

from __future__ import annotations

import json
from pathlib import Path

from claudeguard.commands.cli import Parser, parser as command_parser
from claudeguard.config.load import Sourced, env_overrides, load_config
from claudeguard.config.write import write_starter
from claudeguard.paths import user_config_file


def main(argv: list[str]) -> int:
    parser = command_parser("config")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{show,path,init}", parser_class=Parser)
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
    args = parser.parse_args(argv[1:])

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
        }
        print(json.dumps(out, indent=2))
        return 0
    for layer, path, exists in cfg.searched:
        print(f"# {layer}: {path}{'' if exists else ' (not found)'}")
    if cfg.profile:
        print(f"# profile: {cfg.profile}")
    for key, value in sorted(cfg.values.items()):
        print(f"{key} = {value.value!r}    # {value.source}")
    for key, rules in sorted(cfg.rules.items()):
        for rule in rules:
            print(f"{key} += {rule.rule!r}    # {rule.source}")
    return 0
