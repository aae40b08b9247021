"""Tests for the contract gate. Every test works on a throwaway copy of repo/."""
import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_contract import EXIT_CODES, gate

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"

PRORATE = "src/billing/prorate.py"
TEST_PRORATE = "tests/test_prorate.py"
CONTRACT_NODE = "tests/test_prorate.py::test_partial_month_rounds_down"


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


# --------------------------------------------------------------- the fixtures

BAD_FIXTURES = {
    "bad_readme_as_test_path.json": "unsafe-path",
    "bad_extra_key_smuggles_write.json": "bad-proposal",
    "bad_duplicate_diff_key.json": "bad-proposal",
    "bad_chatty_wrapper.json": "bad-proposal",
    "bad_missing_test_path.json": "bad-proposal",
    "bad_diff_not_a_string.json": "bad-proposal",
    "bad_vendor_src_path.json": "unsafe-path",
    "bad_dotenv_src_path.json": "unsafe-path",
    "bad_parent_dir_src_path.json": "unsafe-path",
    "bad_absolute_src_path.json": "unsafe-path",
    "bad_backslash_test_path.json": "unsafe-path",
    "bad_conftest_as_test_path.json": "unsafe-path",
    "bad_src_off_allowlist.json": "unsafe-path",
    "bad_diff_writes_env.json": "unsafe-path",
    "bad_diff_without_headers.json": "diff-rejected",
    "bad_diff_mode_change.json": "diff-rejected",
    "bad_diff_binary_part.json": "diff-rejected",
    "bad_stale_diff_context.json": "diff-rejected",
    "bad_unknown_behavior.json": "unknown-behavior",
    "bad_contract_already_green.json": "contract-green",
    "bad_contract_missing_node.json": "contract-error",
    "bad_wrong_fix_stays_red.json": "reverted",
    "bad_new_test_file_wrong_fix.json": "reverted",
}

GOOD_FIXTURES = {
    "good_prorate_partial_month.json": {PRORATE},
    "good_prorate_fix_with_regression_test.json": {PRORATE, TEST_PRORATE},
}


def prepare(repo: Path, fixture: str) -> None:
    """Repository state a fixture is meant for, set up in the throwaway copy."""
    if fixture == "bad_contract_missing_node.json":
        # A contract registered before its test landed: the node does not exist.
        contracts = json.loads((repo / "contracts.json").read_text(encoding="utf-8"))
        contracts["invoice_discount"] = "tests/test_invoice.py::test_discount_is_subtracted"
        (repo / "contracts.json").write_text(json.dumps(contracts, indent=2) + "\n", encoding="utf-8")


def test_every_fixture_is_exercised_and_every_refusal_code_has_one():
    shipped = {p.name for p in FIXTURES.glob("*.json")}
    assert shipped == set(BAD_FIXTURES) | set(GOOD_FIXTURES)
    refusals = set(EXIT_CODES) - {"applied"}
    assert refusals <= set(BAD_FIXTURES.values())


@pytest.mark.parametrize("fixture, code", sorted(BAD_FIXTURES.items()))
def test_bad_fixture_is_refused_and_leaves_the_bytes(repo, fixture, code):
    prepare(repo, fixture)
    before = tree(repo)
    result = gate(FIXTURES / fixture, repo)
    assert result.code == code, result.reason
    assert result.exit_code == EXIT_CODES[code]
    assert "\n" not in result.reason and result.reason
    assert tree(repo) == before


@pytest.mark.parametrize("fixture, touched", sorted(GOOD_FIXTURES.items()))
def test_good_fixture_changes_only_the_touched_paths(repo, fixture, touched):
    before = tree(repo)
    result = gate(FIXTURES / fixture, repo)
    assert result.code == "applied", result.reason
    assert set(result.touched) == touched
    after = tree(repo)
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    assert changed == touched
    assert b"amount_cents * days_used // days_in_period" in after[PRORATE]
    assert node_passes(repo, CONTRACT_NODE)


def test_reverted_write_removes_the_file_it_created(repo):
    result = gate(FIXTURES / "bad_new_test_file_wrong_fix.json", repo)
    assert result.code == "reverted"
    assert not (repo / "tests" / "test_prorate_policy.py").exists()
    assert not node_passes(repo, CONTRACT_NODE)


def test_revert_restores_the_bytes_on_disk_not_a_checkout(repo):
    # An uncommitted local edit must survive a failed write byte for byte.
    prorate = repo / PRORATE
    prorate.write_bytes(b"# local edit, not in any VCS\n" + prorate.read_bytes())
    before = tree(repo)
    result = gate(FIXTURES / "bad_wrong_fix_stays_red.json", repo)
    assert result.code == "reverted"
    assert tree(repo) == before


def test_good_proposal_after_it_is_applied_is_already_green(repo):
    assert gate(FIXTURES / "good_prorate_partial_month.json", repo).code == "applied"
    before = tree(repo)
    assert gate(FIXTURES / "good_prorate_partial_month.json", repo).code == "contract-green"
    assert tree(repo) == before


# ----------------------------------------------- proposals built on the fly

def good_document() -> dict:
    return json.loads((FIXTURES / "good_prorate_partial_month.json").read_text(encoding="utf-8"))


def propose(tmp_path: Path, name: str = "proposal.json", **changes) -> Path:
    document = good_document()
    document.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def refused(repo: Path, proposal: Path, code: str) -> None:
    before = tree(repo)
    result = gate(proposal, repo)
    assert result.code == code, result.reason
    assert tree(repo) == before


@pytest.mark.parametrize("raw", [
    b"",
    b"[]",
    b'"just a string"',
    b"\xff\xfe not utf-8",
    b'{"behavior_id": "prorate_partial_month"}',
])
def test_unusable_documents_are_bad_proposals(repo, tmp_path, raw):
    path = tmp_path / "proposal.json"
    path.write_bytes(raw)
    refused(repo, path, "bad-proposal")


@pytest.mark.parametrize("key, value", [
    ("behavior_id", ""),
    ("src_path", None),
    ("test_path", 7),
    ("diff", {"patch": "..."}),
])
def test_values_must_be_non_empty_strings(repo, tmp_path, key, value):
    refused(repo, propose(tmp_path, **{key: value}), "bad-proposal")


def test_missing_proposal_file_is_a_bad_proposal(repo, tmp_path):
    refused(repo, tmp_path / "nowhere.json", "bad-proposal")


def creating(path: str) -> str:
    """A diff that creates `path`: if a path rule were skipped, this would be written."""
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+WRITTEN = True\n"


@pytest.mark.parametrize("src_path", [
    "src/billing/Vendor/money_compat.py",
    "src/node_modules/billing.py",
    "src/third_party/billing.py",
    "src/site-packages/billing.py",
    "src/billing/dist/prorate.py",
    "src/billing/build/prorate.py",
    "src/.git/hooks.py",
    "src/billing/my_SECRETS.py",
    "src/billing/.env.py",
    "src/billing/.envrc/prorate.py",
    "src/billing/sub\\prorate.py",
    "src/billing/./prorate.py",
    "src/billing//prorate.py",
    "src/billing/prorate.py/",
    "C:/repo/src/billing/prorate.py",
    "src/billing/prorate.txt",
    "src/billing/notes",
    "tests/helpers.py",
    "README.md",
])
def test_unsafe_src_paths(repo, tmp_path, src_path):
    refused(repo, propose(tmp_path, src_path=src_path, diff=creating(src_path)), "unsafe-path")


@pytest.mark.parametrize("test_path", [
    "tests/conftest.py",
    "tests/data.json",
    "tests/test_prorate.txt",
    "tests/prorate_test.py",
    "tests/Test_prorate.py",
    "test_prorate.py",
    "src/billing/test_prorate.py",
    "tests/test_prorate.pem",
    "tests/test_prorate.py.lock",
    "tests/test_key.key",
    "tests/test_secret_prorate.py",
    "tests/build/test_prorate.py",
    "tests/../tests/test_prorate.py",
    "tests/sub\\test_prorate.py",
])
def test_test_path_must_be_a_test_module(repo, tmp_path, test_path):
    diff = good_document()["diff"] + creating(test_path)
    refused(repo, propose(tmp_path, test_path=test_path, diff=diff), "unsafe-path")


def test_src_and_test_path_must_differ(repo, tmp_path):
    refused(repo, propose(tmp_path, src_path=TEST_PRORATE), "unsafe-path")


def test_absolute_path_inside_the_repository_is_still_unsafe(repo, tmp_path):
    refused(repo, propose(tmp_path, src_path=str(repo / PRORATE)), "unsafe-path")
    refused(repo, propose(tmp_path, src_path="/" + PRORATE), "unsafe-path")


def test_path_not_on_a_narrowed_allowlist(repo, tmp_path):
    (repo / "allowlist.txt").write_text("# only invoices today\nsrc/billing/invoice.py\ntests/\n", encoding="utf-8")
    refused(repo, propose(tmp_path), "unsafe-path")


def test_missing_allowlist_allows_nothing(repo, tmp_path):
    (repo / "allowlist.txt").unlink()
    refused(repo, propose(tmp_path), "unsafe-path")


def test_paths_are_checked_before_the_diff_is_read(repo, tmp_path):
    refused(repo, propose(tmp_path, src_path="src/billing/vendor/x.py", diff="not a diff at all"), "unsafe-path")


# ------------------------------------------------------------------ the diff

FIX_HUNK = good_document()["diff"].split("\n", 2)[2]


@pytest.mark.parametrize("diff", [
    "--- a/src/billing/__init__.py\n+++ b/src/billing/__init__.py\n" + FIX_HUNK,
    "--- src/billing/prorate.py\n+++ src/billing/prorate.py\n" + FIX_HUNK,
    "--- /dev/null\n+++ b/src/billing/backdoor.py\n@@ -0,0 +1 @@\n+import os\n",
    "diff --git a/pytest.ini b/pytest.ini\n--- a/src/billing/prorate.py\n+++ b/src/billing/prorate.py\n" + FIX_HUNK,
    "Index: allowlist.txt\n--- a/src/billing/prorate.py\n+++ b/src/billing/prorate.py\n" + FIX_HUNK,
])
def test_diff_may_only_name_the_two_paths(repo, tmp_path, diff):
    refused(repo, propose(tmp_path, diff=diff), "unsafe-path")


@pytest.mark.parametrize("diff", [
    FIX_HUNK,
    "the model forgot the diff",
    "--- a/src/billing/prorate.py\n+++ b/tests/test_prorate.py\n" + FIX_HUNK,
    "diff --git a/src/billing/prorate.py b/tests/test_prorate.py\nsimilarity index 100%\n"
    "rename from src/billing/prorate.py\nrename to tests/test_prorate.py\n",
    "diff --git a/src/billing/prorate.py b/tests/test_prorate.py\nsimilarity index 100%\n"
    "copy from src/billing/prorate.py\ncopy to tests/test_prorate.py\n",
    "Binary files a/src/billing/prorate.py and b/src/billing/prorate.py differ\n",
    "--- a/src/billing/prorate.py\n+++ b/src/billing/prorate.py\n",
    good_document()["diff"] + good_document()["diff"],
])
def test_diff_shapes_that_are_rejected(repo, tmp_path, diff):
    refused(repo, propose(tmp_path, diff=diff), "diff-rejected")


def test_no_fuzz_a_hunk_whose_context_drifted_is_rejected(repo, tmp_path):
    # GNU patch's default fuzz would apply this; the gate must not.
    drifted = good_document()["diff"].replace(
        ' raise ValueError("days_in_period must be positive")', ' raise ValueError("period must be positive")')
    refused(repo, propose(tmp_path, diff=drifted), "diff-rejected")


def test_half_applicable_diff_writes_nothing(repo, tmp_path):
    stale_test = ("--- a/tests/test_prorate.py\n+++ b/tests/test_prorate.py\n@@ -1,3 +1,3 @@\n"
                  "-from billing.proration import prorate\n+from billing.prorate import prorate\n \n \n")
    refused(repo, propose(tmp_path, diff=good_document()["diff"] + stale_test), "diff-rejected")


def test_hunk_lines_that_look_like_headers_are_not_headers(repo, tmp_path):
    # Inside a hunk, "--- a/.env" is the removed line "-- a/.env", not a file header.
    prorate = repo / PRORATE
    old = prorate.read_text(encoding="utf-8").replace("    Billing policy:", "-- a/.env\n    Billing policy:")
    prorate.write_text(old, encoding="utf-8")
    new = old.replace("-- a/.env\n", "++ b/.env\n").replace(
        "return round(amount_cents * days_used / days_in_period)", "return amount_cents * days_used // days_in_period")
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/" + PRORATE, "b/" + PRORATE))
    assert "\n--- a/.env\n+++ b/.env\n" in diff
    result = gate(propose(tmp_path, diff=diff), repo)
    assert result.code == "applied", result.reason
    assert prorate.read_text(encoding="utf-8") == new


# ------------------------------------------------------------------- order

def test_diff_shape_is_checked_before_the_behaviour(repo, tmp_path):
    refused(repo, propose(tmp_path, behavior_id="nope", diff=FIX_HUNK), "diff-rejected")


def test_behaviour_is_checked_before_the_diff_is_tried(repo, tmp_path):
    stale = json.loads((FIXTURES / "bad_stale_diff_context.json").read_text(encoding="utf-8"))["diff"]
    refused(repo, propose(tmp_path, behavior_id="nope", diff=stale), "unknown-behavior")


def test_green_contract_wins_over_a_diff_that_would_not_apply(repo, tmp_path):
    stale = json.loads((FIXTURES / "bad_stale_diff_context.json").read_text(encoding="utf-8"))["diff"]
    refused(repo, propose(tmp_path, behavior_id="prorate_full_period", diff=stale), "contract-green")


def test_collection_error_is_a_contract_error(repo, tmp_path):
    (repo / "tests" / "test_invoice.py").write_text("def broken(:\n", encoding="utf-8")
    diff = ("--- a/src/billing/invoice.py\n+++ b/src/billing/invoice.py\n@@ -1,3 +1,3 @@\n"
            '-"""Invoice totals."""\n+"""Invoice totals (cents)."""\n \n \n')
    refused(repo, propose(tmp_path, behavior_id="invoice_total", src_path="src/billing/invoice.py",
                          test_path="tests/test_invoice.py", diff=diff), "contract-error")


# --------------------------------------------------------------------- CLI

@pytest.mark.parametrize("fixture, code", [
    ("good_prorate_partial_month.json", "applied"),
    ("bad_readme_as_test_path.json", "unsafe-path"),
    ("bad_wrong_fix_stays_red.json", "reverted"),
])
def test_command_line_prints_code_and_exits_with_it(repo, fixture, code):
    run = subprocess.run([sys.executable, str(HERE / "agent_contract.py"), str(FIXTURES / fixture), str(repo)],
                         capture_output=True, text=True)
    assert run.returncode == EXIT_CODES[code]
    assert run.stdout.startswith(f"{code}: ")
    assert len(run.stdout.strip().splitlines()) == 1
