"""The approval channel: requests wait on their own named pipe until a human (or the deadline)
answers them, and every decision goes to the audit log.

- ``model``    the ``Request`` and ``Answer`` records and request ids.
- ``requests`` ``post`` / ``Pending`` (the waiting side), ``list_pending``, ``answer``,
               ``wait_for_new`` (the answering side).
- ``store``    the private channel directory and the files of one request.
- ``fifo``     the one-line answer on the pipe, bounded locking, console doorbells.
- ``notify``   ``[approval].notify`` commands.
- ``audit``    the JSON-lines decision log.

The protocol (who creates, writes, reads and removes each file) is in docs/channel-protocol.md.
Only the standard library is imported here, so hooks pay nothing for it.
"""

from claudeguard.channel.model import Answer, Request
from claudeguard.channel.requests import Pending, answer, list_pending, post, wait_for_new

__all__ = ["Answer", "Pending", "Request", "answer", "list_pending", "post", "wait_for_new"]
