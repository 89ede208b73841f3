"""The approval desk: a page on 127.0.0.1 that shows what waits and what is stuck, and answers
with one click.

- ``source``  the seam: ``DeskSource`` (what the page reads and changes) and its records.
- ``local``   ``LocalSource``, the source over the runtime dir and the log dir (no service needed).
- ``views``   how a waiting call will run: Bash parts, Edit/Write/MultiEdit diffs.
- ``server``  ``Desk``: the HTTP server (login token -> cookie, Host check, CSRF, CSP, SSE).
- ``static/`` the page: plain HTML, CSS and JS, no build step, nothing from another origin.

``python -m claudeguard.desk --runtime-dir D --log-dir L`` serves it standalone and prints its
first URL. docs/design.md ("The approval desk") has the security model and the seam.
"""

from __future__ import annotations

from claudeguard.desk.server import Desk

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.desk.server import Admit
    from claudeguard.desk.source import DeskSource


def start_desk(source: DeskSource, *, port: int = 0, admit: Admit | None = None) -> Desk:
    """Serve the desk over ``source`` on 127.0.0.1 (``port`` 0: any free one), in threads of
    this process; ``Desk.login_url()`` gives a first URL, ``Desk.stop()`` ends it. ``admit``:
    asked once per connection (its peer's address), a reason refuses it (403)."""
    return Desk(source, port=port, admit=admit).start()
