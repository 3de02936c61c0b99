"""`python -m grad_reverse.serving COMMAND`: check-serving and make-servable."""

import sys

from grad_reverse.serving.cli import main

sys.exit(main())
