"""include/cudaep.h as the tests see it: read by scripts/cheader.py, the one reader of the header
that the misuse test generator (ctests/misuse) and the bindings generator (scripts/gen_ctypes.py)
share, so the tests derive what they check from the header exactly as the generators do."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADER_PATH = ROOT / "include" / "cudaep.h"
GENERATED_PATH = ROOT / "python" / "cudaep" / "_cudaep_h.py"

sys.dont_write_bytecode = True  # importing the tools below must not litter scripts/
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))

import cheader  # noqa: E402
import gen_ctypes  # noqa: E402,F401  (for test_generated)

#: The parsed header (a cheader.Header).
HEADER = cheader.parse_file(HEADER_PATH)
