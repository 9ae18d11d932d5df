"""scripts/perf-table.py keeps the "where it stands" table of docs/PERFORMANCE.md and
bench/results/INDEX.md equal to what bench/results/current.json and the results files give: the
committed pages are fresh; a number edited by hand in either, a results file changed under them,
and a results file committed without an index line each make the check fail (each planted in a
throwaway copy of the pages and the results); a path that does not name exactly one number is an
error, not a guess; rows no results file backs say so. README's demo block quotes, line for line,
the results file it names. Needs no library: it reads files only."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "perf-table.py"


def load_script():
    spec = importlib.util.spec_from_file_location("perf_table", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pt = load_script()


class PerfTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="cudaep-perf-table-"))
        self.addCleanup(shutil.rmtree, self.dir)
        (self.dir / "docs").mkdir()
        shutil.copy(ROOT / pt.DOC, self.dir / pt.DOC)
        shutil.copytree(ROOT / pt.RESULTS, self.dir / pt.RESULTS)

    def edit(self, rel, old, new):
        p = self.dir / rel
        text = p.read_text(encoding="utf-8")
        self.assertIn(old, text, f"{rel} holds no {old!r} to plant an edit on")
        p.write_text(text.replace(old, new, 1), encoding="utf-8")

    def table(self, root):
        doc = (root / pt.DOC).read_text(encoding="utf-8")
        i, j = doc.index(pt.BEGIN), doc.index(pt.END)
        return doc[i:j]

    def first_number_cell(self):
        """first_number_cell returns a cell of the table's first data row that holds a number."""
        for line in self.table(self.dir).splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 5 and re.match(r"^[0-9]+\.[0-9]+ ", cells[1]):
                return cells[1]
        self.fail("the table has no row with a number")

    def test_committed_pages_are_fresh(self):
        self.assertEqual(pt.problems(ROOT), [], "run scripts/perf-table.py and commit the result")

    def test_the_copy_starts_fresh(self):
        self.assertEqual(pt.problems(self.dir), [])

    def test_number_edited_by_hand_in_the_table_fails(self):
        cell = self.first_number_cell()
        digits = re.match(r"^([0-9]+\.[0-9]+)", cell).group(1)
        bumped = digits[:-1] + str((int(digits[-1]) + 1) % 10)
        self.edit(pt.DOC, f"| {cell} |", f"| {cell.replace(digits, bumped, 1)} |")
        found = pt.problems(self.dir)
        self.assertEqual(len(found), 1, found)
        self.assertIn("docs/PERFORMANCE.md", found[0])
        self.assertIn("by hand", found[0])

    def test_row_edited_by_hand_in_the_index_page_fails(self):
        self.edit(pt.INDEX_MD, "| history |", "| decode, context 128 |")
        found = pt.problems(self.dir)
        self.assertEqual(len(found), 1, found)
        self.assertIn("INDEX.md", found[0])

    def test_results_file_changed_under_the_table_fails(self):
        index = pt.load_index(self.dir)
        row = next(r for r in index["rows"] if "json" in r.get("ours", {}))
        path = self.dir / pt.RESULTS / row["ours"]["file"]
        data = json.loads(path.read_text(encoding="utf-8"))
        node = data
        for step in row["ours"]["json"][:-1]:
            node = pt._select(node, step, "test")
        node[row["ours"]["json"][-1]] = node[row["ours"]["json"][-1]] * 1.5 + 1
        path.write_text(json.dumps(data), encoding="utf-8")
        found = pt.problems(self.dir)
        self.assertTrue(any("PERFORMANCE.md" in p for p in found), found)

    def test_results_file_without_an_index_line_fails(self):
        (self.dir / pt.RESULTS / "h200-2099-01-01-new.json").write_text("{}", encoding="utf-8")
        found = pt.problems(self.dir)
        self.assertEqual(found, ["bench/results/h200-2099-01-01-new.json has no line in "
                                 "bench/results/current.json (add one under \"files\")"])

    def test_index_line_for_a_missing_file_fails(self):
        row_files = {r[k]["file"] for r in pt.load_index(self.dir)["rows"] for k in ("ours", "ratio") if k in r}
        name = next(n for n in pt.load_index(self.dir)["files"] if n not in row_files)
        (self.dir / pt.RESULTS / name).unlink()
        found = pt.problems(self.dir)
        self.assertIn(f"bench/results/current.json lists bench/results/{name}, which does not exist", found)

    def test_write_makes_a_stale_copy_fresh(self):
        cell = self.first_number_cell()
        self.edit(pt.DOC, f"| {cell} |", "| 0.000 ms |")
        self.assertNotEqual(pt.problems(self.dir), [])
        pt.write(self.dir)
        self.assertEqual(pt.problems(self.dir), [])
        self.assertEqual(self.table(self.dir), self.table(ROOT))

    def test_check_exits_1_and_names_the_page(self):
        cell = self.first_number_cell()
        self.edit(pt.DOC, f"| {cell} |", "| 0.000 ms |")
        run = subprocess.run([sys.executable, str(SCRIPT), "--check", "--root", str(self.dir)],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("docs/PERFORMANCE.md", run.stderr)
        clean = subprocess.run([sys.executable, str(SCRIPT), "--check", "--root", str(ROOT)],
                               capture_output=True, text=True)
        self.assertEqual(clean.returncode, 0, clean.stderr)

    def test_a_path_must_name_exactly_one_number(self):
        root = self.dir
        name = "h200-2026-12-01-llama-run15.json"
        cases = {
            "selects several": {"file": name, "json": ["bench", {"row": "prefill 512 tokens"}]},
            "selects none": {"file": name, "json": ["bench", {"arm": "no such arm"}, "ms"]},
            "no such key": {"file": name, "json": ["no_such_key"]},
            "not a number": {"file": name, "json": ["torch"]},
            "no such file": {"file": "h200-2099-01-01-none.json", "json": ["x"]},
            "pattern matches twice": {"file": "h200-2026-12-02-gemv-layer.txt",
                                      "text": r"^with the decode step's prologues +([0-9.]+) us"},
            "no such section": {"file": "h200-2026-12-02-gpu-check-run16.txt", "section": "== none",
                                "text": r"([0-9.]+)"},
        }
        for what, value in cases.items():
            with self.subTest(what):
                with self.assertRaises(pt.ResolveError):
                    pt.resolve(root, value, what)

    def test_a_section_narrows_a_pattern_to_one_match(self):
        value = {"file": "h200-2026-12-02-gpu-check-run16.txt", "section": "== demo-large",
                 "text": r"^  replay only +([0-9.]+) µs/token"}
        self.assertGreater(pt.resolve(ROOT, value, "demo-large"), 0)
        del value["section"]  # the small demo prints the same line: twice in the whole file
        with self.assertRaises(pt.ResolveError):
            pt.resolve(ROOT, value, "whole file")

    def test_rows_without_a_results_file_say_so(self):
        index = pt.load_index(ROOT)
        unbacked = [r for r in index["rows"]
                    if "missing" in r or "missing" in (r.get("baseline") or {})]
        self.assertTrue(unbacked, "the ORT MLP row has no results file")
        table = self.table(ROOT)
        for row in unbacked:
            cells = pt.row_cells(ROOT, row)
            self.assertIn("no committed results file", " ".join(cells), row["measure"])
            self.assertIn(row["measure"], table)
        # The compiled-PyTorch baselines (decode at 128 and 2048, prefill) are backed now: each
        # resolves to a number of its file.
        compiled = [r for r in index["rows"] if "compiled PyTorch" in (r.get("baseline") or {}).get("label", "")]
        self.assertGreaterEqual(len(compiled), 3, "decode at 128 and 2048, and prefill")
        for row in compiled:
            self.assertGreater(pt.resolve(ROOT, row["baseline"]["value"], row["measure"]), 0, row["measure"])


class ReadmeDemoBlockTest(unittest.TestCase):
    """README's demo block is what a committed results file says the demo printed."""

    def test_demo_block_quotes_the_results_file_it_names(self):
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        m = re.search(r"`(bench/results/[^`]+)`[^`]*?:\n\n```\n(.*?)\n```", readme, re.S)
        self.assertIsNotNone(m, "README's demo block names no bench/results file before it")
        source = (ROOT / m.group(1)).read_text(encoding="utf-8").splitlines()
        for line in m.group(2).splitlines():
            self.assertIn(line, source, f"README's demo line is not in {m.group(1)}")


if __name__ == "__main__":
    unittest.main()
