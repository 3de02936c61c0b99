"""`python -m gpu_check_lib ...` with scripts/ on PYTHONPATH (what
scripts/gpu_check.sh runs)."""

import sys

if not __package__:  # run as a directory: its modules import as `gpu_check_lib.*`
    sys.exit("gpu_check_lib: run it as `PYTHONPATH=scripts python -m gpu_check_lib ...` (or scripts/gpu_check.sh)")

from gpu_check_lib.cli import main  # noqa: E402

sys.exit(main())
