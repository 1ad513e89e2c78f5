"""``python -m app.cli``: the same as the ``zero3-lab`` command."""

import sys

from app.cli.main import main

sys.exit(main())
