"""The host's permission prompt as the keyboard (issue 35): an IDE, a CI action or an Agent SDK
program that runs the CLI with ``--permission-prompt-tool stdio`` answers the CLI's
``can_use_tool`` requests itself, over the stream-json control protocol on the CLI's stdin and
stdout. The launcher stands between them:

- **CLI -> host** (the stdout relay, whole lines only in such a session): a ``control_request``
  ``can_use_tool`` goes to the host as it is, and the guard starts its own leg of the call
  (``_guard_leg``): the policy and the session's grants first (a grant given meanwhile answers at
  once), else ``approval.idle_before_channel`` seconds for the host's answer, then a request in
  the approval channel (``via: "ide"``). A ``control_cancel_request`` of the CLI's ends that leg.
- **host -> CLI** (the stdin relay): every line goes on as it is, but a ``control_response`` to a
  pending ``can_use_tool``: the host answered first. The guard's leg ends (its channel request is
  withdrawn); an ``allow`` whose ``updatedInput`` the policy denies becomes a deny (deny rules
  hold whatever the host answers); one audit row says the host answered (``decided_by:
  "keyboard"``, ``via: "ide"``) before the CLI hears the answer.
- the guard's leg answering first: the launcher writes the ``control_response`` into the CLI's
  stdin (the input the box runs, ``gate.box.allowed_input``) and a ``control_cancel_request`` to
  the host, which ends its prompt (the Agent SDK cancels its ``can_use_tool`` callback). An
  answer that comes second is dropped.

The CLI's stdin is one end of a socket pair, not a pipe: a pipe's ``/proc/<pid>/fd/0`` can be
opened for writing by any process of the user that sees the CLI, and a line written there would
answer the CLI's prompt for the agent (a socket cannot be reopened that way). Only this relay
writes to it. What the host itself answers is the host's (the user's IDE, the SDK program's
callback): the guard does not second-guess it beyond the deny rules.
"""

from __future__ import annotations

import json
import os
import socket
import threading

from claudeguard.channel import audit as audit_log
from claudeguard.decision import Decision, audit_row, failure
from claudeguard.gate.box import allowed_input
from claudeguard.gate.call import Asking, Call
from claudeguard.gate.decide import decide_call, policy_decision, reuse_answer
from claudeguard.gate.proof import NO_SIGN, end_session, lifeless
from claudeguard.gate.session import Session, load_session, recall_call
from claudeguard.policy.decide import summarize_call
from claudeguard.shim.child import write_all

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

READ_SIZE = 65536
HOST = "ide"  # the audit rows' ``via`` and ``answered_by.command``


class Asked:
    """One ``can_use_tool`` request of the CLI's, until someone answers it."""

    __slots__ = ("request_id", "tool", "input", "tool_use_id", "agent_id", "settled")

    def __init__(self, request_id: str, request: dict[str, Any]) -> None:
        self.request_id = request_id
        self.tool = str(request.get("tool_name") or "")
        raw = request.get("input")
        self.input: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self.tool_use_id = request.get("tool_use_id") if isinstance(request.get("tool_use_id"), str) else None
        self.agent_id = request.get("agent_id") if isinstance(request.get("agent_id"), str) else None
        self.settled = ""  # "host", "guard" or "cancelled" once someone answered


class HostPrompts:
    """The relay of a session whose host answers prompts over stdio (see the module docstring)."""

    def __init__(self, session_dir: str, cli_in: socket.socket, out_fd: int = 1, in_fd: int = 0) -> None:
        self.session_dir = session_dir
        self.cli_in = cli_in
        self.out_fd = out_fd
        self.in_fd = in_fd
        self.lock = threading.Lock()  # the pending requests and the end of input (never held while writing)
        self.in_lock = threading.Lock()  # whole lines to the CLI: the host's, and the guard's answers
        self.out_lock = threading.Lock()  # whole lines to the host: the CLI's, and our cancels
        self.pending: dict[str, Asked] = {}
        self.out_buf = b""
        self.queued = b""  # our cancels, held while a line of the CLI's is half written
        self.host_done = False  # the host closed its side: the CLI's stdin closes once nothing waits
        self.cli_closed = False
        self.ended = False  # the CLI exited: every leg stops
        self._session: Session | None = None

    # -- CLI -> host ---------------------------------------------------------------------------------

    def out(self, data: bytes) -> bool:
        """The CLI's output: whole lines go to the host (a request is known before the host can
        answer it); False when the host stopped reading."""
        with self.out_lock:
            buf = self.out_buf + data
            cut = buf.rfind(b"\n") + 1
            self.out_buf = buf[cut:]
            if not cut:
                return True
            lines = buf[:cut]
            if b'"can_use_tool"' in lines or b'"control_cancel_request"' in lines:
                for line in lines.splitlines():
                    self._from_cli(line)
            if self.queued and not self.out_buf:
                lines, self.queued = lines + self.queued, b""
            return write_all(self.out_fd, lines)

    def flush(self) -> bool:
        """What is left of the CLI's output (it exited without a last newline)."""
        with self.out_lock:
            rest, self.out_buf = self.out_buf, b""
            if self.queued:
                rest, self.queued = rest + (b"\n" if rest else b"") + self.queued, b""
            return write_all(self.out_fd, rest) if rest else True

    def _from_cli(self, line: bytes) -> None:
        if b'"can_use_tool"' not in line and b'"control_cancel_request"' not in line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("request_id"), str):
            return
        if msg.get("type") == "control_cancel_request":
            self._settle(msg["request_id"], "cancelled")
            return
        request = msg.get("request")
        if msg.get("type") != "control_request" or not isinstance(request, dict) or request.get(
                "subtype") != "can_use_tool":
            return
        asked = Asked(msg["request_id"], request)
        with self.lock:
            self.pending[asked.request_id] = asked
        threading.Thread(target=self._guard_leg, args=(asked,), name="claudeguard-host-prompt", daemon=True).start()

    def _cancel_at_host(self, request_id: str) -> None:
        line = json.dumps({"type": "control_cancel_request", "request_id": request_id}).encode() + b"\n"
        with self.out_lock:
            if self.out_buf:  # never inside one of the CLI's lines: out() writes it after the line
                self.queued += line
                return
            write_all(self.out_fd, line)

    # -- host -> CLI ---------------------------------------------------------------------------------

    def start(self) -> HostPrompts:
        threading.Thread(target=self._relay_in, name="claudeguard-host-input", daemon=True).start()
        return self

    def _relay_in(self) -> None:
        buf = b""
        while True:
            try:
                data = os.read(self.in_fd, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            cut = buf.rfind(b"\n") + 1
            if not cut:
                continue
            lines, buf = buf[:cut], buf[cut:]
            if b'"control_response"' in lines and self.pending:
                lines = b"".join(self._from_host(line) for line in lines.splitlines(keepends=True))
            if lines and not self._to_cli(lines):
                return
        if buf:
            self._to_cli(buf)
        with self.lock:
            self.host_done = True
        self._close_if_done()

    def _to_cli(self, data: bytes) -> bool:
        with self.in_lock:
            if self.cli_closed:
                return False
            try:
                self.cli_in.sendall(data)
            except OSError:
                return False
        return True

    def _close_if_done(self) -> None:
        """End the CLI's input once the host ended its own and no request waits for the guard's
        answer (which goes in through it)."""
        with self.lock:
            if not self.host_done or self.pending:
                return
        with self.in_lock:
            if self.cli_closed:
                return
            self.cli_closed = True
            try:
                self.cli_in.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _from_host(self, line: bytes) -> bytes:
        """A line of the host's: an answer to a pending request settles it (the line that goes
        on, or b"" when the guard answered first)."""
        if b'"control_response"' not in line:
            return line
        try:
            msg = json.loads(line)
        except ValueError:
            return line
        response = msg.get("response") if isinstance(msg, dict) else None
        rid = response.get("request_id") if isinstance(response, dict) else None
        asked = self.pending.get(rid) if isinstance(rid, str) else None
        if asked is None or response is None:
            return line
        if not self._settle(asked.request_id, "host"):
            return b""  # the guard's leg answered first: the CLI has its answer
        try:
            changed = self._host_answered(asked, response)
        except Exception as exc:  # noqa: BLE001 - fail closed with a reason, never a traceback
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            changed = {"behavior": "deny", "message": f"claudeguard: the guard could not check the IDE's answer "
                                                      f"({detail}); denied"}
        if changed is None:
            return line
        out = {"type": "control_response", "response": {"subtype": "success", "request_id": asked.request_id,
                                                        "response": changed}}
        return json.dumps(out).encode() + b"\n"

    def _host_answered(self, asked: Asked, response: dict[str, Any]) -> dict[str, Any] | None:
        """Audit the host's answer (before the CLI hears it); the answer to send instead when a
        deny rule holds against the input the host allowed, else None (the host's goes on)."""

        session = self.session()
        inner = response.get("response") if response.get("subtype") == "success" else None
        behavior = inner.get("behavior") if isinstance(inner, dict) else None
        who = self._who(session, asked)
        if behavior not in ("allow", "deny") or not isinstance(inner, dict):
            self._audit_event(session, asked, who, "ide-error", f"the IDE answered with an error: "
                              f"{str(response.get('error') or response)[:200]}")
            return None
        updated = inner.get("updatedInput")
        run_input = updated if isinstance(updated, dict) else asked.input
        if behavior == "allow":
            cwd = str(session.snapshot.get("cwd") or os.getcwd())
            verdict = policy_decision(session, asked.tool, run_input, who.get("agent_type"), cwd)
            if verdict.decision == "deny":
                row = Decision("deny", verdict.reason, rule=verdict.rule, source=verdict.source)
                self._audit(session, asked, who, row, run_input, host_answer="allow")
                return {"behavior": "deny", "message": verdict.reason}
        message = inner.get("message") if behavior == "deny" else None
        row = Decision(behavior, str(message or f"answered in the IDE ({behavior})"), decided_by="keyboard",
                       scope="once")
        self._audit(session, asked, who, row, run_input, answered_by={
            "uid": os.getuid(), "pid": os.getpid(), "tty": None, "command": HOST})
        return None

    # -- the guard's leg -----------------------------------------------------------------------------

    def _guard_leg(self, asked: Asked) -> None:
        """Policy and grants, then the channel after the host's head start; the first answer wins."""
        try:
            verdict, run_input = self._decide(asked)
        except Exception as exc:  # noqa: BLE001 - fail closed with a reason
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            verdict, run_input = failure(f"claudeguard: the guard could not decide ({detail}); denied"), asked.input
        if verdict is None or verdict.decision not in ("allow", "deny"):
            self._close_if_done()
            return  # the host answered first, the CLI took the request back, or the session ended
        if not self._settle(asked.request_id, "guard"):
            self._audit_late(asked, verdict)
            return
        answer: dict[str, Any] = ({"behavior": "allow", "updatedInput": run_input} if verdict.decision == "allow"
                                  else {"behavior": "deny", "message": verdict.reason})
        line = {"type": "control_response", "response": {"subtype": "success", "request_id": asked.request_id,
                                                          "response": answer}}
        self._to_cli(json.dumps(line).encode() + b"\n")
        self._cancel_at_host(asked.request_id)
        self._close_if_done()

    def _decide(self, asked: Asked) -> tuple[Decision | None, dict[str, Any]]:

        session = self.session()
        audit_log.session_log.set(session.snapshot.get("log_dir"))
        if lifeless(session):  # the CLI asks before any hook of the guard's reached it: they are gone
            assert session.dir is not None
            why = NO_SIGN.format(what=f"a {asked.tool} call")
            end_session(session.dir, why)
            return failure(why), asked.input
        who = self._who(session, asked)
        call = Call(asked.tool, asked.input, who.get("agent_type"), who.get("agent_id"),
                    str(session.snapshot.get("cwd") or os.getcwd()), asked.tool_use_id)
        asking = Asking(HOST, "ask", delay_s=float(session.approval.get("idle_before_channel") or 0),
                        still_wanted=lambda: not asked.settled and not self.ended)
        verdict = reuse_answer(session, asked.tool, asked.input, who.get("agent_id"), asked.tool_use_id) or decide_call(
            session, call, asking)
        return verdict, allowed_input(session, asked.tool, asked.input, verdict) or asked.input

    # -- shared --------------------------------------------------------------------------------------

    def _settle(self, request_id: str, by: str) -> bool:
        """Mark the request answered by ``by``; False when someone answered it first."""
        with self.lock:
            asked = self.pending.get(request_id)
            if asked is None or asked.settled:
                return False
            asked.settled = by
            del self.pending[request_id]
        return True

    def session(self) -> Session:
        if self._session is None:
            self._session = load_session(self.session_dir)
        return self._session

    @staticmethod
    def _who(session: Session, asked: Asked) -> dict[str, Any]:
        """The asking agent, as the PreToolUse hook noted it for this tool_use_id."""
        who = recall_call(session, asked.tool_use_id)
        if not who.get("agent_id") and asked.agent_id:
            who = {**who, "agent_id": asked.agent_id}
        return who

    def _audit(self, session: Session, asked: Asked, who: dict[str, Any], row: Decision, run_input: dict[str, Any],
               **extra: object) -> None:

        if row.answered_by is None and "answered_by" in extra:
            answered = extra.pop("answered_by")
            row.answered_by = answered if isinstance(answered, dict) else None
        audit_log.session_log.set(session.snapshot.get("log_dir"))
        audit_log.record(audit_row(
            row, session_id=session.id, agent_type=who.get("agent_type"), agent_id=who.get("agent_id"),
            tool=asked.tool, summary=summarize_call(asked.tool, run_input),
            input_digest=audit_log.input_digest(run_input), via=HOST, tool_use_id=asked.tool_use_id, **extra))

    def _audit_event(self, session: Session, asked: Asked, who: dict[str, Any], event: str, message: str) -> None:

        audit_log.session_log.set(session.snapshot.get("log_dir"))
        audit_log.record({"event": event, "session_id": session.id, "agent_type": who.get("agent_type"),
                          "agent_id": who.get("agent_id"), "tool": asked.tool,
                          "summary": summarize_call(asked.tool, asked.input), "via": HOST,
                          "tool_use_id": asked.tool_use_id, "message": message})

    def _audit_late(self, asked: Asked, verdict: Decision) -> None:
        """The guard's leg decided after the host had answered: its row is written, its answer was not applied."""
        try:
            session = self.session()
            self._audit_event(session, asked, self._who(session, asked), "ide-answered-first",
                              f"the guard's {verdict.decision} ({verdict.decided_by}) came after the IDE's answer "
                              "and was not applied")
        except Exception:  # noqa: BLE001 - the audit log never blocks
            pass

    def end(self) -> None:
        """The CLI exited: every leg stops waiting (their channel requests are withdrawn)."""
        self.ended = True
