"""``claudeguardctl config show|path|init``: the effective config with the source of every value,
the files searched, and a commented starter file."""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="claudeguardctl config")
    sub = parser.add_subparsers(dest="action", required=True)
    show = sub.add_parser("show", help="effective values and where each came from")
    show.add_argument("--profile")
    show.add_argument("--json", action="store_true")
    sub.add_parser("path", help="the files searched, in order")
    init = sub.add_parser("init", help="write a commented starter config")
    init.add_argument("--project", action="store_true", help="write ./.claudeguard.toml instead of the user file")
    init.add_argument("--file", help="write this file")
    args = parser.parse_args(argv[1:])

    from claudeguard.config.load import Sourced, env_overrides, load_config

    if args.action == "init":
        from claudeguard.config.write import write_starter
        from claudeguard.paths import user_config_file

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
        import json

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
