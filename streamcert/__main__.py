"""``python -m streamcert`` is the ``streamcert`` command."""

import sys

from .cli import main

sys.exit(main())
