"""``python -m modstream``: the same as the ``modstream`` command."""

import sys

from modstream.cli import main

sys.exit(main())
