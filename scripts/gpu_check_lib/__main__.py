"""`python scripts/gpu_check_lib ...` (what scripts/gpu_check.sh runs), or
`python -m gpu_check_lib ...` with scripts/ on PYTHONPATH."""

import os
import sys

if not __package__:  # run as a directory: make `gpu_check_lib` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_check_lib.cli import main  # noqa: E402

sys.exit(main())
