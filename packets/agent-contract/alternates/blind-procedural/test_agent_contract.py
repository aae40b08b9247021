"""Tests for the contract gate. Every test works on a throwaway copy of repo/."""
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import pytest

from agent_contract import EXIT_CODES, gate

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"


@pytest.fixture
def repo(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(HERE / "repo", copy)
    return copy


def tree(root: Path) -> dict:
    """Every file's bytes, ignoring interpreter and pytest caches."""
    skip = {"__pycache__", ".pytest_cache"}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not skip.intersection(p.relative_to(root).parts)
    }


def node_passes(repo: Path, node: str) -> bool:
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
                         cwd=repo, capture_output=True, text=True)
    return run.returncode == 0


def test_known_good_proposal_is_applied(repo):
    result = gate(FIXTURES / "good_prorate_partial_month.json", repo)
    assert result.code == "applied"
    assert node_passes(repo, "tests/test_prorate.py::test_partial_month_rounds_down")


def test_readme_as_test_path_is_refused_before_any_write(repo):
    before = tree(repo)
    result = gate(FIXTURES / "bad_readme_as_test_path.json", repo)
    assert result.code == "unsafe-path"
    assert tree(repo) == before


# ---------------------------------------------------------------------------

PRORATE = "src/billing/prorate.py"
CONTRACT = "tests/test_prorate.py::test_partial_month_rounds_down"

# fixture -> (expected code, how to set the throwaway repo up first or None)
FIXTURE_TABLE = {
    "good_prorate_partial_month.json": ("applied", None),
    "good_floor_division_with_new_test.json": ("applied", None),
    "bad_readme_as_test_path.json": ("unsafe-path", None),
    "bad_proposal_extra_field.json": ("bad-proposal", None),
    "bad_proposal_duplicate_src_path.json": ("bad-proposal", None),
    "bad_proposal_markdown_fence.json": ("bad-proposal", None),
    "bad_proposal_null_diff.json": ("bad-proposal", None),
    "bad_proposal_top_level_array.json": ("bad-proposal", None),
    "bad_path_vendored_module.json": ("unsafe-path", None),
    "bad_path_dotdot_escape.json": ("unsafe-path", None),
    "bad_path_signing_key.json": ("unsafe-path", None),
    "bad_path_conftest_as_test.json": ("unsafe-path", None),
    "bad_path_src_in_tests.json": ("unsafe-path", None),
    "bad_path_not_allowlisted.json": ("unsafe-path", None),
    "bad_diff_touches_pytest_ini.json": ("unsafe-path", None),
    "bad_diff_copy_src_into_test.json": ("diff-rejected", None),
    "bad_diff_hunk_only.json": ("diff-rejected", None),
    "bad_diff_context_mismatch.json": ("diff-rejected", None),
    "bad_behavior_unregistered.json": ("unknown-behavior", None),
    "bad_contract_passes_already.json": ("contract-green", None),
    # The contract was registered in contracts.json before its test was written.
    "bad_contract_node_missing.json": ("contract-error", "register_missing_contract"),
    "bad_fix_does_not_turn_green.json": ("reverted", None),
    "bad_fix_edits_both_still_red.json": ("reverted", None),
}


def register_missing_contract(repo: Path) -> None:
    table_path = repo / "contracts.json"
    table = json.loads(table_path.read_text(encoding="utf-8"))
    table["prorate_negative_days"] = "tests/test_prorate.py::test_negative_days_raise"
    table_path.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")


def fixture_doc(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


GOOD_DIFF = fixture_doc("good_prorate_partial_month.json")["diff"]


def new_file_diff(path: str) -> str:
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+AGENT_WAS_HERE = 1\n"


class GateTestCase(unittest.TestCase):
    """Each test gets its own scratch folder; fresh_repo() copies repo/ into it."""

    def setUp(self):
        scratch = tempfile.TemporaryDirectory(prefix="gate-test-")
        self.addCleanup(scratch.cleanup)
        self.scratch = Path(scratch.name)
        self.copies = 0
        self.repo = self.fresh_repo()

    def fresh_repo(self) -> Path:
        self.copies += 1
        target = self.scratch / f"repo{self.copies}"
        shutil.copytree(HERE / "repo", target)
        return target

    def proposal_file(self, text: str | bytes) -> Path:
        path = self.scratch / f"proposal{self.copies}-{len(list(self.scratch.iterdir()))}.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return path

    def proposal(self, **fields) -> Path:
        doc = {"behavior_id": "prorate_partial_month", "src_path": PRORATE,
               "test_path": "tests/test_prorate.py", "diff": GOOD_DIFF}
        doc.update(fields)
        return self.proposal_file(json.dumps(doc))

    def assert_refused(self, proposal: Path, code: str, repo: Path | None = None):
        repo = repo or self.repo
        before = tree(repo)
        result = gate(proposal, repo)
        self.assertEqual(result.code, code, result.reason)
        self.assertEqual(result.exit_code, EXIT_CODES[code])
        self.assertTrue(result.reason and "\n" not in result.reason)
        self.assertEqual(tree(repo), before, "a refused proposal changed the repository")
        return result


class FixtureTests(GateTestCase):
    def test_table_lists_every_fixture_and_every_refusal_code(self):
        on_disk = sorted(path.name for path in FIXTURES.glob("*.json"))
        self.assertEqual(on_disk, sorted(FIXTURE_TABLE))
        codes = {code for code, _ in FIXTURE_TABLE.values()}
        self.assertEqual(codes, set(EXIT_CODES))
        for name, (code, _) in FIXTURE_TABLE.items():
            self.assertEqual(name.startswith("good_"), code == "applied", name)

    def test_each_bad_fixture_gets_its_code_and_writes_nothing(self):
        for name, (code, setup) in FIXTURE_TABLE.items():
            if code == "applied":
                continue
            with self.subTest(fixture=name):
                repo = self.fresh_repo()
                if setup:
                    globals()[setup](repo)
                self.assert_refused(FIXTURES / name, code, repo)

    def test_each_good_fixture_changes_exactly_what_it_touched(self):
        for name, (code, _) in FIXTURE_TABLE.items():
            if code != "applied":
                continue
            with self.subTest(fixture=name):
                repo = self.fresh_repo()
                before = tree(repo)
                result = gate(FIXTURES / name, repo)
                self.assertEqual(result.code, "applied", result.reason)
                after = tree(repo)
                changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
                self.assertEqual(changed, set(result.touched))
                self.assertIn(PRORATE, changed)
                self.assertTrue(node_passes(repo, CONTRACT))


class DocumentTests(GateTestCase):
    def test_documents_that_are_not_one_clean_object(self):
        samples = {
            "empty file": b"",
            "trailing second object": json.dumps(fixture_doc("good_prorate_partial_month.json")).encode() + b"\n{}",
            "not utf-8": '{"behavior_id": "prorate_partial_month"}'.encode("utf-16"),
            "string": b'"apply it please"',
            "null": b"null",
        }
        for label, raw in samples.items():
            with self.subTest(label):
                self.assert_refused(self.proposal_file(raw), "bad-proposal")

    def test_fields_must_be_present_non_empty_strings(self):
        for key in ("behavior_id", "src_path", "test_path", "diff"):
            for value in ("", 0, [], False):
                with self.subTest(key=key, value=value):
                    self.assert_refused(self.proposal(**{key: value}), "bad-proposal")
            with self.subTest(key=key, missing=True):
                doc = fixture_doc("good_prorate_partial_month.json")
                del doc[key]
                self.assert_refused(self.proposal_file(json.dumps(doc)), "bad-proposal")

    def test_duplicate_diff_with_a_second_write(self):
        text = json.dumps(fixture_doc("good_prorate_partial_month.json"))
        text = text[:-1] + ', "diff": ' + json.dumps(GOOD_DIFF + new_file_diff("src/billing/extra.py")) + "}"
        self.assert_refused(self.proposal_file(text), "bad-proposal")

    def test_unreadable_proposal(self):
        self.assert_refused(self.scratch / "missing.json", "bad-proposal")
        self.assert_refused(self.scratch, "bad-proposal")


class PathTests(GateTestCase):
    UNSAFE_SRC = [
        "/src/billing/prorate.py", "c:/src/billing/prorate.py", "src\\billing\\prorate.py",
        "src/billing/a\\b.py", "src/billing/../billing/prorate.py", "src/./billing/prorate.py",
        "src//billing/prorate.py", "src/billing/", "src/billing/VENDOR/x.py",
        "src/billing/node_modules/x.py", "src/billing/third_party/x.py", "src/billing/site-packages/x.py",
        "src/billing/dist/x.py", "src/billing/Build/x.py", "src/billing/.git/x.py",
        "src/billing/topsecret.py", "src/billing/.env_loader.py", "src/billing/.env/x.py",
        "src/billing/cert.pem", "src/billing/app.key", "src/billing/poetry.lock",
        "src/billing/notes.txt", "src/billing/prorate", "tests/prorate.py", "tests/test_x.py",
        "setup.py", "src/other.py",
    ]
    UNSAFE_TEST = [
        "tests/conftest.py", "tests/fixtures.json", "tests/README.md", "tests/prorate_test.py",
        "tests/test_prorate.py.bak", "tests/TEST_prorate.py", "test_prorate.py",
        "src/billing/test_prorate.py", "Tests/test_prorate.py", "tests/secret/test_x.py",
        "tests/dist/test_x.py", "tests/.env/test_x.py", "tests/test_x.lock",
        "tests/../tests/test_prorate.py", "tests\\test_prorate.py",
    ]

    def test_unsafe_src_paths(self):
        for path in self.UNSAFE_SRC:
            with self.subTest(src_path=path):
                self.assert_refused(self.proposal(src_path=path, diff=new_file_diff(path)), "unsafe-path")

    def test_unsafe_test_paths(self):
        for path in self.UNSAFE_TEST:
            with self.subTest(test_path=path):
                diff = GOOD_DIFF + new_file_diff(path)
                self.assert_refused(self.proposal(test_path=path, diff=diff), "unsafe-path")

    def test_absolute_path_that_points_inside_the_repo(self):
        inside = str(self.repo / PRORATE)
        self.assert_refused(self.proposal(src_path=inside), "unsafe-path")

    def test_same_file_for_both(self):
        self.assert_refused(self.proposal(test_path="tests/test_prorate.py", src_path="tests/test_prorate.py"),
                            "unsafe-path")

    def test_allowlist_is_the_repositorys_own(self):
        (self.repo / "allowlist.txt").write_text("# tests only\n\ntests/\nsrc/billing/invoice.py\n", encoding="utf-8")
        self.assert_refused(self.proposal(), "unsafe-path")

    def test_exact_file_line_allows_that_file_only(self):
        (self.repo / "allowlist.txt").write_text("src/billing/prorate.py\ntests/\n", encoding="utf-8")
        self.assertEqual(gate(self.proposal(), self.repo).code, "applied")
        repo = self.fresh_repo()
        (repo / "allowlist.txt").write_text("src/billing/prorate.py\ntests/\n", encoding="utf-8")
        other = "src/billing/prorate_v2.py"
        self.assert_refused(self.proposal(src_path=other, diff=new_file_diff(other)), "unsafe-path", repo)

    def test_no_allowlist_means_nothing_is_allowed(self):
        (self.repo / "allowlist.txt").unlink()
        self.assert_refused(self.proposal(), "unsafe-path")

    def test_paths_win_over_a_garbage_diff(self):
        self.assert_refused(self.proposal(test_path="tests/data.csv", diff="@@ garbage"), "unsafe-path")


class DiffTests(GateTestCase):
    HUNK = GOOD_DIFF.split("\n", 2)[2]

    def test_diff_naming_other_files_is_unsafe(self):
        diffs = {
            "extra file": GOOD_DIFF + new_file_diff("src/billing/__init__.py"),
            "no a/ prefix": "--- src/billing/prorate.py\n+++ src/billing/prorate.py\n" + self.HUNK,
            "wrong -p1 target": "--- a/billing/prorate.py\n+++ b/billing/prorate.py\n" + self.HUNK,
            "git header elsewhere": "diff --git a/.env b/.env\n" + GOOD_DIFF,
            "rename from secret": "diff --git a/src/billing/prorate.py b/src/billing/prorate.py\n"
                                  "rename from .env\nrename to src/billing/prorate.py\n" + GOOD_DIFF,
        }
        for label, diff in diffs.items():
            with self.subTest(label):
                self.assert_refused(self.proposal(diff=diff), "unsafe-path")

    def test_diff_shapes_that_are_refused(self):
        diffs = {
            "plain text": "please round down",
            "bare hunk": self.HUNK,
            "header only": "--- a/src/billing/prorate.py\n+++ b/src/billing/prorate.py\n",
            "rename by headers": "--- a/src/billing/prorate.py\n+++ b/tests/test_prorate.py\n" + self.HUNK,
            "mode change": "diff --git a/src/billing/prorate.py b/src/billing/prorate.py\n"
                           "old mode 100644\nnew mode 100755\n" + GOOD_DIFF,
            "executable new file": "diff --git a/tests/test_prorate.py b/tests/test_prorate.py\n"
                                   "new file mode 100755\n" + GOOD_DIFF,
            "binary": "diff --git a/src/billing/prorate.py b/src/billing/prorate.py\n"
                      "Binary files a/src/billing/prorate.py and b/src/billing/prorate.py differ\n",
            "same file twice": GOOD_DIFF + GOOD_DIFF,
            "fuzz needed": GOOD_DIFF.replace("must be positive", "must be > 0"),
            "reversed": GOOD_DIFF.replace("\n-    return round", "\n+    return ROUND").replace(
                "\n+    return amount", "\n-    return amount").replace("ROUND", "round"),
        }
        for label, diff in diffs.items():
            with self.subTest(label):
                self.assert_refused(self.proposal(diff=diff), "diff-rejected")

    def test_second_file_failing_keeps_the_first_unwritten(self):
        stale = ("--- a/tests/test_prorate.py\n+++ b/tests/test_prorate.py\n@@ -1 +1 @@\n"
                 "-from billing.proration import prorate\n+from billing.prorate import prorate\n")
        self.assert_refused(self.proposal(diff=GOOD_DIFF + stale), "diff-rejected")

    def test_header_lookalikes_inside_a_hunk(self):
        # Removing a line "-- a/.env" and adding "++ b/.env" puts header-looking lines in a hunk.
        target = self.repo / PRORATE
        before = target.read_text(encoding="utf-8").replace("actually used.\n", "actually used.\n-- a/.env\n", 1)
        target.write_text(before, encoding="utf-8")
        after = before.replace("-- a/.env\n", "++ b/.env\n").replace(
            "round(amount_cents * days_used / days_in_period)", "amount_cents * days_used // days_in_period")
        diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                            "a/" + PRORATE, "b/" + PRORATE))
        self.assertIn("\n--- a/.env\n+++ b/.env\n", diff)
        result = gate(self.proposal(diff=diff), self.repo)
        self.assertEqual(result.code, "applied", result.reason)
        self.assertEqual(target.read_text(encoding="utf-8"), after)


class OrderTests(GateTestCase):
    STALE = fixture_doc("bad_diff_context_mismatch.json")["diff"]

    def test_diff_shape_before_behaviour(self):
        self.assert_refused(self.proposal(behavior_id="nobody", diff="no headers here"), "diff-rejected")

    def test_behaviour_before_red_run_and_dry_run(self):
        self.assert_refused(self.proposal(behavior_id="nobody", diff=self.STALE), "unknown-behavior")

    def test_green_contract_before_dry_run(self):
        self.assert_refused(self.proposal(behavior_id="prorate_full_period", diff=self.STALE), "contract-green")

    def test_broken_contract_before_dry_run(self):
        (self.repo / "tests" / "test_prorate.py").write_text("import nonexistent_module_xyz\n", encoding="utf-8")
        self.assert_refused(self.proposal(diff=self.STALE), "contract-error")


class WriteTests(GateTestCase):
    def test_revert_puts_back_local_bytes_and_removes_new_files(self):
        target = self.repo / PRORATE
        target.write_bytes(b"# uncommitted local note\r\n" + target.read_bytes())
        new_test = "tests/test_prorate_extra.py"
        diff = fixture_doc("bad_fix_does_not_turn_green.json")["diff"] + (
            f"--- /dev/null\n+++ b/{new_test}\n@@ -0,0 +1,2 @@\n+def test_nothing():\n+    pass\n")
        result = self.assert_refused(self.proposal(test_path=new_test, diff=diff), "reverted")
        self.assertEqual(set(result.touched), {PRORATE, new_test})
        self.assertFalse((self.repo / new_test).exists())

    def test_new_test_in_a_new_folder_is_cleaned_up(self):
        new_test = "tests/rounding/test_floor.py"
        diff = fixture_doc("bad_fix_does_not_turn_green.json")["diff"] + new_file_diff(new_test)
        self.assert_refused(self.proposal(test_path=new_test, diff=diff), "reverted")
        self.assertFalse((self.repo / "tests" / "rounding").exists())

    def test_applied_twice_is_green_the_second_time(self):
        self.assertEqual(gate(self.proposal(), self.repo).code, "applied")
        self.assert_refused(self.proposal(), "contract-green")


class CommandLineTests(GateTestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, str(HERE / "agent_contract.py"), *map(str, args)],
                              capture_output=True, text=True)

    def test_prints_code_and_exits_with_it(self):
        for name in ("good_prorate_partial_month.json", "bad_behavior_unregistered.json",
                     "bad_fix_does_not_turn_green.json"):
            with self.subTest(name):
                code = FIXTURE_TABLE[name][0]
                done = self.run_cli(FIXTURES / name, self.fresh_repo())
                self.assertEqual(done.returncode, EXIT_CODES[code])
                self.assertRegex(done.stdout, rf"\A{code}: \S.*\n\Z")

    def test_usage_error(self):
        self.assertEqual(self.run_cli().returncode, 2)


if __name__ == "__main__":
    unittest.main()
