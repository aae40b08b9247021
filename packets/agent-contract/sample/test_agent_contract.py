"""Tests for the contract gate. Every test works on a throwaway copy of repo/."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_contract import gate

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


@pytest.mark.parametrize("name, code", [
    ("bad_extra_key.json", "bad-proposal"),
    ("bad_missing_key.json", "bad-proposal"),
    ("bad_dotdot_path.json", "unsafe-path"),
    ("bad_absolute_path.json", "unsafe-path"),
    ("bad_vendor_path.json", "unsafe-path"),
    ("bad_secret_in_diff.json", "unsafe-path"),
    ("bad_unknown_behavior.json", "unknown-behavior"),
    ("bad_green_head.json", "contract-green"),
    ("bad_stale_diff.json", "diff-rejected"),
    ("bad_still_red.json", "reverted"),
])
def test_known_bad_proposal_leaves_the_tree_as_it_was(repo, name, code):
    before = tree(repo)
    result = gate(FIXTURES / name, repo)
    assert result.code == code, result.reason
    assert tree(repo) == before


def test_revert_restores_the_bytes_on_disk_not_a_clean_checkout(repo):
    # The working copy differs from anything a VCS would restore.
    prorate = repo / "src/billing/prorate.py"
    prorate.write_bytes(b"# local note\r\n" + prorate.read_bytes())
    before = tree(repo)
    assert gate(FIXTURES / "bad_still_red.json", repo).code == "reverted"
    assert tree(repo) == before


@pytest.mark.parametrize("text", ["[]", "not json", '{"behavior_id": 1, "src_path": "a", "test_path": "b", "diff": "c"}'])
def test_malformed_documents_are_bad_proposals(repo, tmp_path, text):
    doc = tmp_path / "proposal.json"
    doc.write_text(text)
    assert gate(doc, repo).code == "bad-proposal"


def test_duplicate_key_cannot_smuggle_a_second_path(repo, tmp_path):
    good = (FIXTURES / "good_prorate_partial_month.json").read_text()
    doc = tmp_path / "proposal.json"
    doc.write_text(good.rstrip().rstrip("}") + ', "src_path": "src/billing/../../x.py"}')
    before = tree(repo)
    assert gate(doc, repo).code == "bad-proposal"
    assert tree(repo) == before


def test_cli_exit_code_matches_the_result(repo):
    run = subprocess.run([sys.executable, str(HERE / "agent_contract.py"),
                          str(FIXTURES / "bad_green_head.json"), str(repo)],
                         capture_output=True, text=True)
    assert run.returncode == 5
    assert run.stdout.startswith("contract-green")
