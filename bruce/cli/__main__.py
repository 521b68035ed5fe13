"""``python -m bruce.cli.main``: the ``bruce`` command."""
import sys

from bruce.cli.main.main import main

sys.exit(main())
