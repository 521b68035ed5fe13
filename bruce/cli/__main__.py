"""``python -m bruce.cli``: the ``bruce`` command."""
import sys

from bruce.cli.main import main

sys.exit(main())
