"""``python -m claudeguard ...`` is ``claudeguard ...``."""

import sys

from claudeguard.shim.main import main

sys.exit(main())
