"""Make the raw-resource builders (a Pulumi program's sibling module) importable by the tests."""

import sys
from pathlib import Path

RAW_PROGRAM = Path(__file__).resolve().parent / "programs" / "raw"
if str(RAW_PROGRAM) not in sys.path:
    sys.path.insert(0, str(RAW_PROGRAM))
