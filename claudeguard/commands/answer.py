"""``claudeguardctl approve|deny ID [--scope once|agent|session|forever] [--message TEXT]``.

``once`` answers this request; ``agent`` and ``session`` also become grants in the asking session
(recorded by the waiting call); ``forever`` additionally writes the rule into a config file with
tomlkit (the user file unless ``--file`` names another), keeping its comments and layout.
"""

from __future__ import annotations

import os
from pathlib import Path

from claudeguard import channel
from claudeguard.channel.audit import audit_path, ends_of
from claudeguard.channel.model import ID_MIN_PREFIX, SCOPES, is_id_text
from claudeguard.commands.audit import answerer
from claudeguard.commands.cli import parser as command_parser
from claudeguard.config.load import read_layer
from claudeguard.config.write import add_rule
from claudeguard.errors import ConfigError, GuardError, NotFoundError, NotPending
from claudeguard.gate.grants import grant_rules, refusal
from claudeguard.paths import user_config_file


def main(argv: list[str]) -> int:
    verb = argv[0]

    word = "allow" if verb == "approve" else "deny"
    parser = command_parser(verb,
                            epilog="A second answer, or an answer to an expired or unknown id, is refused (exit 1).")
    parser.add_argument("id",
                        help="the request id from `claudeguardctl pending` (a unique prefix of 6+ characters will do)")
    parser.add_argument("--scope", choices=SCOPES, default="once",
                        help=f"once (default): this call only; agent: also {word} this call for the asking "
                             f"agent type in this "
                             f"session; session: for every agent of the session; forever: also write the "
                             f"{word} rule into "
                             "the config file (comments and layout kept)")
    if verb == "deny":
        parser.add_argument("--message", "-m",
                            help="the reason the model receives (default: a short note that a human denied it)")
    parser.add_argument("--file", help="with --scope forever: the config file to write (default: the user file)")
    parser.add_argument("--choice",
                        help="for a dialog request: the option to pick, by its label or its number (1 = first)")
    args = parser.parse_args(argv[1:])
    decision = "allow" if verb == "approve" else "deny"
    message = getattr(args, "message", None)
    if not _local(args.id):
        from claudeguard.commands import fleet_cli  # noqa: PLC0415 - the fleet's imports only for a fleet request

        if fleet_cli.configured():
            return fleet_answer(args.id, decision, scope=args.scope, message=message, choice=args.choice)
    return answer_request(args.id, decision, scope=args.scope, message=message, file=args.file,
                          by=f"claudeguardctl {verb}",
                          choice=args.choice)


def _local(request_id: str) -> bool:
    """Whether ``request_id`` names a request waiting in this machine's channel (a local id is
    answered here first; any other goes to the fleet, when there is one)."""
    prefix = request_id.strip().lower()
    return len(prefix) >= 6 and any(r.id.startswith(prefix) for r in channel.list_pending())


def fleet_answer(request_id: str, decision: str, *, scope: str, message: str | None, choice: str | None,
                 machine: str | None = None, shown_sha256: str | None = None, quiet: bool = False) -> int:
    """Answer a request of another machine of the fleet and wait for its owner's verdict: exit 0
    only when the owner applied this very answer; otherwise one line ("already answered by <who>
    at <when>", refused, no word in time) and exit 1. ``forever`` is refused before anything is
    sent (it would write the owner's config from afar)."""
    from claudeguard.commands import fleet_cli  # noqa: PLC0415 - the fleet's imports only for a fleet request

    fleet_cli.refuse_inside_session()
    with fleet_cli.client() as client:
        view = client.find(request_id, machine)
        client.answer(view["id"], decision, scope=scope, message=message, choice=choice, machine=view["machine"],
                      shown_sha256=shown_sha256)
    if not quiet:
        word = "approved" if decision == "allow" else "denied"
        print(f"{view['id']} ({view['machine']}) {word} ({scope}): applied by {view['machine']}")
    return 0


def answer_request(request_id: str, decision: str, *, scope: str, message: str | None, file: str | None, by: str,
                   quiet: bool = False, choice: str | None = None, vouched: dict[str, object] | None = None) -> int:
    """Answer one request through the channel (its waiter judges the answer and records who gave
    it: this process, and ``vouched``, what a relaying desk says of its user); ``forever`` also
    writes the rule. A refusal is one line and exit 1, nothing written."""
    try:
        return _answer(request_id, decision, scope=scope, message=message, file=file, by=by, quiet=quiet,
                       choice=choice, vouched=vouched)
    except NotPending as exc:
        raise NotFoundError(gone_line(exc)) from None


def gone_line(exc: NotPending) -> str:
    """What became of a request that waits no more, from the audit log: answered (how, when, by
    whom), expired, answered at the keyboard; or that no such request is known here."""
    given = exc.request_id.strip().lower()
    ends = ends_of(given) if is_id_text(given) and len(given) >= ID_MIN_PREFIX else []
    ids = {str(e.get("request_id")) for e in ends}
    if len(ids) > 1:
        return f"{given}: matches {len(ids)} requests that ended; give more of the id"
    if not ends:
        if exc.reason is not None:
            return str(exc)  # the channel knows how it ended; the log (of another dir?) does not
        return (f"{given}: no such pending request, and the audit log ({audit_path()}) knows of no request with "
                f"this id either (a mistyped id, or one of another machine or log dir)")
    end = ends[-1]
    rid, at, by = end.get("request_id"), end.get("time"), end.get("decided_by")
    word = "approved" if end.get("decision") == "allow" else "denied"
    if by == "human":
        scope = end.get("scope") or "once"
        return f"{rid}: already answered at {at}: {word} ({scope}){answerer(end.get('answered_by'))}"
    if by == "timeout":
        return f"{rid}: expired at {at}: nobody answered before its deadline; {word} by approval.on_timeout"
    if by == "keyboard":
        return f"{rid}: already answered at the keyboard of its session at {at}: {word}"
    return f"{rid}: ended at {at} without an answer ({word}: {end.get('reason') or by})"


def _answer(request_id: str, decision: str, *, scope: str, message: str | None, file: str | None, by: str,
            quiet: bool, choice: str | None, vouched: dict[str, object] | None) -> int:
    match = [r for r in channel.list_pending() if r.id.startswith(request_id)] if len(request_id) >= 6 else []
    if len(match) > 1:
        raise NotFoundError(f"{request_id}: matches {len(match)} requests; give more of the id")
    rules: list[str] = []
    target: Path | None = None
    if scope != "once":
        if not match:
            raise NotPending(f"{request_id}: no such pending request (already answered, expired or never existed)",
                             request_id)
        req = match[0]
        rules = grant_rules(req)
        if scope == "forever":
            target = Path(file) if file else user_config_file()
        if (refused := refusal(req, decision, scope, rules, target)) is not None:
            raise GuardError(refused)
        if target is not None:
            _check_writable(target)
    if choice is not None and choice.isdigit():
        # a dialog's option by number: the request lists its choices in order
        choices = match[0].choices if match and match[0].choices else []
        if not 1 <= int(choice) <= len(choices):
            raise GuardError(f"{request_id}: --choice {choice}: the request has {len(choices)} choices")
        choice = choices[int(choice) - 1]
    answered = channel.answer(request_id, decision, scope=scope, message=message, by=by, choice=choice,
                              vouched=vouched)
    word = "approved" if decision == "allow" else "denied"
    if target is not None:
        try:
            for rule in rules:
                add_rule(target, decision, rule)
        except GuardError as exc:
            raise GuardError(f"{answered.id} {word} for the session, but the rule was not written: {exc}") from None
        if not quiet:
            print(f"{answered.id} {word} (forever): {', '.join(rules)} written to [permissions].{decision} in {target}")
        return 0
    if not quiet:
        extra = f": {', '.join(rules)}" if rules else ""
        print(f"{answered.id} {word} ({scope}){extra}")
    return 0


def _check_writable(path: Path) -> None:
    """Fail before answering rather than answer and then fail to write (nothing half-done)."""
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{path}: not writable; not answering")

        read_layer("forever target", path, required=True)
    else:
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK):
            raise ConfigError(f"{path}: cannot be created; not answering")
