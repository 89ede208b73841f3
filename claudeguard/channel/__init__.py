"""The approval channel: requests wait on their own named pipe until a human (or the deadline)
answers them, and every decision goes to the audit log.

- ``model``    the ``Request`` and ``Answer`` records and request ids.
- ``requests`` ``post`` / ``Pending`` (the waiting side), ``tell_waiter`` (the owner of a
               held request's dialog).
- ``answers``  ``list_pending``, ``answer``, ``wait_for_new`` and ``Doorbell`` (the answering side).
- ``store``    the private channel directory and the files of one request.
- ``fifo``     the one-line answer on the pipe, bounded locking, console doorbells.
- ``notify``   ``[approval].notify`` commands.
- ``audit``    the JSON-lines decision log.

The protocol (who creates, writes, reads and removes each file) is in docs/design.md ("The approval channel").
Only the standard library is imported here, so hooks pay nothing for it.
"""

from __future__ import annotations

__all__ = ["Answer", "Doorbell", "Pending", "Request", "answer", "list_pending", "post", "tell_waiter", "wait_for_new"]

_HOMES = {"Answer": "model", "Request": "model", "Doorbell": "answers", "answer": "answers", "list_pending": "answers",
          "wait_for_new": "answers"}

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.channel.model import Answer, Request
    from claudeguard.channel.answers import Doorbell, answer, list_pending, wait_for_new
    from claudeguard.channel.requests import Pending, post


def __getattr__(name: str) -> object:
    # Lazy: the hook imports `claudeguard.channel.audit` for every decision and must not pay for
    # the request machinery (fcntl, json, ...) unless a request is actually posted.
    if name in __all__:
        import importlib

        module = importlib.import_module(f"claudeguard.channel.{_HOMES.get(name, 'requests')}")
        return getattr(module, name)
    raise AttributeError(f"module 'claudeguard.channel' has no attribute {name!r}")
