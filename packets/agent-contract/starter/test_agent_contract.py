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
