"""``python -m claudeguard ...`` is ``claudeguard ...``."""

from __future__ import annotations

import sys

from claudeguard.shim.main import main

sys.exit(main())
