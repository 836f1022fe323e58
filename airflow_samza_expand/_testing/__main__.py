"""`python -m airflow_samza_expand._testing`: same as `samza-expand dev broker` (test/dev only)."""

import sys

from .cli import main

sys.exit(main())
