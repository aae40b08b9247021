"""Tests for the contract gate. Every test works on a throwaway copy of repo/."""
import json
import shutil
import subprocess
import sys
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


# --- every refusal code, one fixture each (or more), on a throwaway copy ---------------

PARTIAL_NODE = "tests/test_prorate.py::test_partial_month_rounds_down"

REFUSALS = [
    ("bad_extra_key.json", "bad-proposal"),
    ("bad_duplicate_key.json", "bad-proposal"),
    ("bad_chatty_reply.json", "bad-proposal"),
    ("bad_readme_as_test_path.json", "unsafe-path"),
    ("bad_dotdot_src_path.json", "unsafe-path"),
    ("bad_vendor_src_path.json", "unsafe-path"),
    ("bad_diff_touches_invoice.json", "unsafe-path"),
    ("bad_unknown_behavior.json", "unknown-behavior"),
    ("bad_contract_already_green.json", "contract-green"),
    ("bad_contract_node_missing.json", "contract-error"),
    ("bad_stale_context.json", "diff-rejected"),
    ("bad_still_red.json", "reverted"),
]


def add_missing_node_contract(repo: Path) -> None:
    """The shipped contracts all exist; map one more id to a node that does not."""
    contracts = json.loads((repo / "contracts.json").read_text())
    contracts["prorate_partial_month_v2"] = "tests/test_prorate.py::test_no_such_test"
    (repo / "contracts.json").write_text(json.dumps(contracts, indent=2) + "\n")


@pytest.mark.parametrize("fixture, code", REFUSALS, ids=[f for f, _ in REFUSALS])
def test_refusals_leave_the_repository_as_it_was(repo, fixture, code):
    if fixture == "bad_contract_node_missing.json":
        add_missing_node_contract(repo)
    before = tree(repo)
    result = gate(FIXTURES / fixture, repo)
    assert result.code == code, result.reason
    assert result.exit_code == EXIT_CODES[code]
    assert result.reason and "\n" not in result.reason
    assert tree(repo) == before
    assert not node_passes(repo, PARTIAL_NODE)


def test_every_refusal_code_has_a_fixture():
    codes = {code for _f, code in REFUSALS}
    assert codes == set(EXIT_CODES) - {"applied"}
    assert all((FIXTURES / f).is_file() for f, _c in REFUSALS)


def test_good_proposal_changes_only_the_touched_file(repo):
    before = tree(repo)
    result = gate(FIXTURES / "good_prorate_partial_month.json", repo)
    after = tree(repo)
    assert result.code == "applied"
    assert result.touched == ("src/billing/prorate.py",)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert changed == {"src/billing/prorate.py"}


def test_good_proposal_may_touch_source_and_test(repo):
    result = gate(FIXTURES / "good_fix_and_extra_test.json", repo)
    assert result.code == "applied"
    assert set(result.touched) == {"src/billing/prorate.py", "tests/test_prorate.py"}
    assert node_passes(repo, "tests/test_prorate.py::test_one_day_of_three_rounds_down")


def test_reverted_write_restores_bytes_on_disk_not_head(repo):
    # "previous" means what was on disk before the write: a local edit must survive a revert
    prorate = repo / "src/billing/prorate.py"
    prorate.write_bytes(prorate.read_bytes().replace(b"Proration for", b"Proration (local edit) for", 1))
    before = tree(repo)
    result = gate(FIXTURES / "bad_still_red.json", repo)
    assert result.code == "reverted"
    assert tree(repo) == before


def retarget(diff: str, path: str) -> str:
    return (diff.replace("--- a/src/billing/prorate.py", "--- a/" + path)
                .replace("+++ b/src/billing/prorate.py", "+++ b/" + path))


@pytest.mark.parametrize("field, value", [
    ("src_path", "/abs/src/billing/prorate.py"),
    ("src_path", "src/billing/../billing/prorate.py"),
    ("src_path", "src/billing/vendor/money_compat.py"),
    ("src_path", "src/billing/node_modules/prorate.py"),
    ("src_path", "src\\billing\\prorate.py"),
    ("src_path", "src//billing/prorate.py"),
    ("src_path", "./src/billing/prorate.py"),
    ("src_path", "src/billing/.env.local"),
    ("src_path", "src/billing/my_secrets.py"),
    ("src_path", "src/billing/Vendor/x.py"),
    ("src_path", "src/billing/prorate.lock"),
    ("src_path", "tests/helpers.py"),
    ("src_path", "src/billing/README.md"),
    ("src_path", "service.py"),
    ("test_path", "tests/conftest.py"),
    ("test_path", "src/billing/test_prorate.py"),
    ("test_path", "tests/data.json"),
])
def test_unsafe_paths_are_refused(repo, tmp_path, field, value):
    doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
    doc[field] = value
    if field == "src_path":
        # the diff names the same path, so only the path rules can refuse it
        doc["diff"] = retarget(doc["diff"], value)
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps(doc))
    before = tree(repo)
    assert gate(proposal, repo).code == "unsafe-path"
    assert tree(repo) == before


def test_absolute_path_inside_the_repository_is_still_refused(repo, tmp_path):
    doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
    doc["src_path"] = str(repo / "src/billing/prorate.py")
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps(doc))
    assert gate(proposal, repo).code == "unsafe-path"


@pytest.mark.parametrize("value", [None, "", 7, ["src/billing/prorate.py"]])
def test_values_must_be_non_empty_strings(repo, tmp_path, value):
    doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
    doc["src_path"] = value
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps(doc))
    assert gate(proposal, repo).code == "bad-proposal"


def test_diff_without_headers_is_rejected(repo, tmp_path):
    doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
    doc["diff"] = "Replace round() with floor division in prorate."
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps(doc))
    assert gate(proposal, repo).code == "diff-rejected"


def test_command_line_prints_code_and_exits_with_it(repo):
    run = subprocess.run([sys.executable, str(HERE / "agent_contract.py"),
                          str(FIXTURES / "bad_unknown_behavior.json"), str(repo)],
                         capture_output=True, text=True)
    assert run.returncode == EXIT_CODES["unknown-behavior"]
    assert run.stdout.startswith("unknown-behavior: ")
