"""What the Llama script's torch-free tests share: bench/scripts/llama_decode.py's module-level
assignments and functions by name, taken from its source (the script itself imports torch)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "scripts" / "llama_decode.py"


def load(names):
    """The module-level assignments and functions named in names, executed in a namespace of
    their own (with re imported); an AssertionError names any the script does not define."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    body = []
    for node in tree.body:
        found = ({node.name} if isinstance(node, ast.FunctionDef) else
                 {t.id for t in node.targets if isinstance(t, ast.Name)} if isinstance(node, ast.Assign) else set())
        if found & names:
            body.append(node)
    ns = {"re": re}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(SCRIPT), "exec"), ns)
    missing = names - set(ns)
    if missing:
        raise AssertionError(f"{SCRIPT} defines no {sorted(missing)}")
    return ns
