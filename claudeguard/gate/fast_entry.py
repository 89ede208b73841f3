"""Start-up of the callbacks the CLI runs on every tool call (``hook``) and every start
(``mcp-serve``), run as ``python -E -S fast_entry.py COMMAND``.

``-S`` skips the site module (``.pth`` processing: ~8 ms of every hook call here) and ``-E`` the
``PYTHON*`` variables (so a ``PYTHONDONTWRITEBYTECODE`` in the user's environment does not make
every hook compile the package from source). The directory holding the ``claudeguard`` package
is put first on ``sys.path`` by hand; it is also where the package's dependencies are installed.
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from claudeguard.commands.ctl import main  # noqa: E402

sys.exit(main())
