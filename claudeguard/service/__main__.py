"""``python -m claudeguard.service``: the resident guard service (see ``server``)."""

from __future__ import annotations

import sys

from claudeguard.service.server import main

sys.exit(main(sys.argv[1:]))
