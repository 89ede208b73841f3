"""``python -m claudeguard.service``: the resident guard service (see ``server``)."""

import sys

from claudeguard.service.server import main

sys.exit(main(sys.argv[1:]))
