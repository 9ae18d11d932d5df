"""scripts/header-copy.sh keeps capi/cudaep.h (tracked, for the cgo preambles) identical to
include/cudaep.h: it refreshes the copy from an edited header, refuses a hand-edited copy, and
fails loudly on a commit whose copy differs from its header (a fresh clone of such a commit must
not pass `make test` by make quietly refreshing the copy). Each case runs in a throwaway git
repository holding the two files."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "header-copy.sh"
HEADER, COPY = "include/cudaep.h", "capi/cudaep.h"
V1 = "/* cudaep.h v1 */\n#define CUDAEP_ABI_VERSION 5\n"
V2 = "/* cudaep.h v2 */\n#define CUDAEP_ABI_VERSION 6\n"


@unittest.skipIf(shutil.which("git") is None, "git is not installed")
class HeaderCopyTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="cudaep-header-copy-"))
        self.addCleanup(shutil.rmtree, self.dir)
        (self.dir / "include").mkdir()
        (self.dir / "capi").mkdir()
        self.git("init", "-q")

    def git(self, *args):
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
        subprocess.run(["git", *args], cwd=self.dir, env=env, check=True, capture_output=True)

    def write(self, rel, text, age=0):
        p = self.dir / rel
        p.write_text(text)
        if age:  # seconds in the past, to order modification times without sleeping
            t = p.stat().st_mtime - age
            os.utime(p, (t, t))

    def commit(self, header, copy):
        self.write(HEADER, header)
        self.write(COPY, copy)
        self.git("add", HEADER, COPY)
        self.git("commit", "-q", "-m", "headers")

    def run_script(self):
        return subprocess.run(["bash", str(SCRIPT), HEADER, COPY], cwd=self.dir, capture_output=True, text=True)

    def copy_text(self):
        return (self.dir / COPY).read_text()

    def test_identical_files_pass_quietly(self):
        self.commit(V1, V1)
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout + r.stderr, "")

    def test_a_stale_committed_copy_fails_loudly_and_is_not_refreshed(self):
        # What a fresh clone of a commit that changed the header without its copy looks like,
        # whatever order the checkout wrote the two files in.
        self.commit(V2, V1)
        for header_age in (0, 100):
            self.write(HEADER, V2, age=header_age)
            r = self.run_script()
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"{COPY} differs from {HEADER} as both are committed", r.stderr)
            self.assertIn(f"cp {HEADER} {COPY}", r.stderr)
            self.assertEqual(self.copy_text(), V1, "the stale copy must not be papered over")

    def test_an_edited_header_refreshes_the_copy(self):
        self.commit(V1, V1)
        self.write(HEADER, V2)
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"refreshed {COPY} from {HEADER}", r.stdout)
        self.assertEqual(self.copy_text(), V2)

    def test_a_hand_edited_copy_is_refused(self):
        self.commit(V1, V1)
        self.write(COPY, V2)
        r = self.run_script()
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{COPY} differs from {HEADER} and was edited by hand", r.stderr)
        self.assertIn(f"Edit {HEADER}", r.stderr)
        self.assertEqual(self.copy_text(), V2, "the hand edit is left for the contributor to move")

    def test_both_edited_the_newer_header_wins_the_older_is_refused(self):
        self.commit(V1, V1)
        self.write(COPY, V1 + "/* hand edit */\n", age=100)
        self.write(HEADER, V2)
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.copy_text(), V2)

        self.write(HEADER, V1 + "/* header edit */\n", age=100)
        self.write(COPY, V2 + "/* newer hand edit */\n")
        r = self.run_script()
        self.assertEqual(r.returncode, 1)
        self.assertIn("edited by hand", r.stderr)

    def test_a_missing_copy_is_made(self):
        self.commit(V1, V1)
        (self.dir / COPY).unlink()
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.copy_text(), V1)

    def test_outside_git_the_modification_times_decide(self):
        shutil.rmtree(self.dir / ".git")
        self.write(HEADER, V2)
        self.write(COPY, V1, age=100)
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.copy_text(), V2)

        self.write(HEADER, V1, age=100)
        r = self.run_script()
        self.assertEqual(r.returncode, 1)
        self.assertIn("edited by hand", r.stderr)

    def test_the_repository_copy_is_tracked_and_identical(self):
        """The real pair: capi/cudaep.h is committed (go build ./... works in a fresh clone)
        and equals include/cudaep.h."""
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", COPY], cwd=ROOT, capture_output=True)
        header = subprocess.run(["git", "ls-files", "--error-unmatch", HEADER], cwd=ROOT, capture_output=True)
        if tracked.returncode != 0 and header.returncode != 0:
            # No git, or a copy of the tree whose git does not track the repository's files
            # (as on a machine the tests are carried to).
            self.skipTest("not a git checkout of the repository")
        self.assertEqual(tracked.returncode, 0, f"{COPY} is not tracked by git")
        self.assertEqual((ROOT / HEADER).read_bytes(), (ROOT / COPY).read_bytes())
        ignored = subprocess.run(["git", "check-ignore", "-q", COPY], cwd=ROOT)
        self.assertNotEqual(ignored.returncode, 0, f"{COPY} is still git-ignored")


if __name__ == "__main__":
    unittest.main()
