"""`python -m executorch_portable_lib ...` is the `etrt` command line tool."""
import sys

from executorch_portable_lib.cli import main

sys.exit(main())
