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


# ---------------------------------------------------------------------------
# Every fixture, by the code the gate must answer, on its own throwaway copy.

import json  # noqa: E402  (kept below the shipped tests on purpose)

import agent_contract  # noqa: E402

RED_NODE = "tests/test_prorate.py::test_partial_month_rounds_down"

EXPECTED = {
    "good_prorate_partial_month.json": "applied",
    "good_fix_with_new_test_module.json": "applied",
    "bad_smuggled_second_write.json": "bad-proposal",
    "bad_array_document.json": "bad-proposal",
    "bad_readme_as_test_path.json": "unsafe-path",
    "bad_absolute_src_path.json": "unsafe-path",
    "bad_env_file_as_src.json": "unsafe-path",
    "bad_conftest_as_test_path.json": "unsafe-path",
    "bad_diff_edits_vendor_tree.json": "unsafe-path",
    "bad_mode_change.json": "diff-rejected",
    "bad_behavior_typo.json": "unknown-behavior",
    "bad_invoice_already_green.json": "contract-green",
    "bad_contract_cannot_collect.json": "contract-error",
    "bad_hunk_does_not_apply.json": "diff-rejected",
    "bad_half_up_stays_red.json": "reverted",
}


def with_broken_contract(root: Path) -> None:
    """contract-error needs a contract whose module cannot even be collected."""
    (root / "tests" / "test_import_smoke.py").write_text(
        "import billing.no_such_module  # collection fails\n\n\ndef test_smoke():\n    assert True\n")
    contracts = json.loads((root / "contracts.json").read_text())
    contracts["billing_import_smoke"] = "tests/test_import_smoke.py::test_smoke"
    (root / "contracts.json").write_text(json.dumps(contracts))


def changed_paths(before: dict, after: dict) -> set:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


class TestFixtures:
    def test_fixture_folder_matches_the_table(self):
        on_disk = {p.name for p in FIXTURES.glob("*.json")}
        assert on_disk == set(EXPECTED)
        refusal_codes = {c for name, c in EXPECTED.items() if name.startswith("bad_")}
        assert refusal_codes == set(agent_contract.EXIT_CODES) - {"applied"}
        assert all(c == "applied" for n, c in EXPECTED.items() if n.startswith("good_"))

    @pytest.mark.parametrize("name", sorted(EXPECTED))
    def test_fixture_answers_its_code(self, repo, name):
        if name == "bad_contract_cannot_collect.json":
            with_broken_contract(repo)
        before = tree(repo)
        result = gate(FIXTURES / name, repo)
        after = tree(repo)
        assert result.code == EXPECTED[name], f"{name}: {result.code}: {result.reason}"
        assert result.exit_code == agent_contract.EXIT_CODES[EXPECTED[name]]
        if result.code == "applied":
            assert changed_paths(before, after) == set(result.touched)
            assert node_passes(repo, RED_NODE)
        else:
            assert after == before, f"{name} left the repository changed"


class TestOrderOfChecks:
    """The first failing check decides; later stages must not even run."""

    def write(self, tmp_path, **fields):
        doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
        doc.update(fields)
        target = tmp_path / "proposal.json"
        target.write_text(json.dumps(doc))
        return target

    def test_unsafe_path_wins_over_a_broken_diff(self, repo, tmp_path):
        proposal = self.write(tmp_path, src_path="src/billing/../billing/prorate.py", diff="not a diff")
        assert gate(proposal, repo).code == "unsafe-path"

    def test_diff_paths_are_checked_before_the_behaviour(self, repo, tmp_path):
        stray = "--- a/pytest.ini\n+++ b/pytest.ini\n@@ -1,2 +1,2 @@\n [pytest]\n-pythonpath = src\n+pythonpath = src tests\n"
        proposal = self.write(tmp_path, behavior_id="nope", diff=stray)
        assert gate(proposal, repo).code == "unsafe-path"

    def test_headerless_diff_is_rejected_before_running_anything(self, repo, tmp_path):
        proposal = self.write(tmp_path, behavior_id="nope", diff="please change round() to //")
        assert gate(proposal, repo).code == "diff-rejected"

    def test_unknown_behaviour_before_the_red_run(self, repo, tmp_path):
        proposal = self.write(tmp_path, behavior_id="invoice_tax")
        assert gate(proposal, repo).code == "unknown-behavior"

    def test_green_contract_is_never_written(self, repo, tmp_path):
        before = tree(repo)
        proposal = self.write(tmp_path, behavior_id="prorate_full_period")
        assert gate(proposal, repo).code == "contract-green"
        assert tree(repo) == before


class TestDocument:
    @pytest.mark.parametrize("text", [
        "",
        "not json at all",
        '"just a string"',
        '{"behavior_id": "prorate_partial_month", "src_path": "src/billing/prorate.py", '
        '"test_path": "tests/test_prorate.py", "diff": "x", "src_path": "src/billing/invoice.py"}',
        '{"behavior_id": "prorate_partial_month", "src_path": "src/billing/prorate.py", "test_path": "tests/test_prorate.py"}',
        '{"behavior_id": "", "src_path": "src/billing/prorate.py", "test_path": "tests/test_prorate.py", "diff": "x"}',
        '{"behavior_id": 3, "src_path": "src/billing/prorate.py", "test_path": "tests/test_prorate.py", "diff": "x"}',
    ])
    def test_malformed_documents_are_bad_proposals(self, repo, tmp_path, text):
        proposal = tmp_path / "p.json"
        proposal.write_text(text, encoding="utf-8")
        assert gate(proposal, repo).code == "bad-proposal"

    def test_unreadable_and_non_utf8_files(self, repo, tmp_path):
        assert gate(tmp_path / "missing.json", repo).code == "bad-proposal"
        latin = tmp_path / "latin1.json"
        latin.write_bytes('{"behavior_id": "caf\xe9"}'.encode("latin-1"))
        assert gate(latin, repo).code == "bad-proposal"


class TestPaths:
    @pytest.mark.parametrize("src", [
        "src/billing/secret_rates.py", "src/billing/SECRETS/x.py", "src/billing/.envrc",
        "src/billing/node_modules/x.py", "src/billing/site-packages/x.py", "src/dist/x.py",
        "src/build/x.py", "src/billing/.git/hooks.py", "src/billing/third_party/x.py",
        "src/billing/cert.pem", "src/billing/id.key", "src/billing/poetry.lock",
        "src/billing/./prorate.py", "src/billing/../billing/prorate.py", "src/billing/prorate.py/",
        "src/billing/vendor/money_compat.py", "C:/src/billing/prorate.py",
        "tests/test_helpers_src.py", "allowlist.txt", "contracts.json",
    ])
    def test_src_path_refusals(self, repo, tmp_path, src):
        doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
        doc["src_path"] = src
        # point the diff at the same path: nothing but the path rules may refuse it
        doc["diff"] = doc["diff"].replace("a/src/billing/prorate.py", "a/" + src) \
                                 .replace("b/src/billing/prorate.py", "b/" + src)
        proposal = tmp_path / "p.json"
        proposal.write_text(json.dumps(doc))
        before = tree(repo)
        assert gate(proposal, repo).code == "unsafe-path"
        assert tree(repo) == before

    @pytest.mark.parametrize("test_path", [
        "tests/README.md", "tests/prorate_test.py", "tests/test_prorate.txt",
        "src/billing/prorate.py", "test_prorate.py", "tests\\test_prorate.py",
    ])
    def test_test_path_refusals(self, repo, tmp_path, test_path):
        doc = json.loads((FIXTURES / "good_prorate_partial_month.json").read_text())
        doc["test_path"] = test_path
        proposal = tmp_path / "p.json"
        proposal.write_text(json.dumps(doc))
        assert gate(proposal, repo).code == "unsafe-path"

    def test_repository_without_git_and_with_its_own_allowlist(self, repo):
        assert not (repo / ".git").exists()
        (repo / "allowlist.txt").write_text("# only tests may change here\ntests/\n")
        before = tree(repo)
        result = gate(FIXTURES / "good_prorate_partial_month.json", repo)
        assert result.code == "unsafe-path"
        assert tree(repo) == before


class TestRevert:
    def test_revert_restores_local_bytes_and_removes_created_files(self, repo, tmp_path):
        src = repo / "src" / "billing" / "prorate.py"
        src.write_bytes(src.read_bytes().replace(b"Proration for", b"Proration (edited locally) for"))
        good = json.loads((FIXTURES / "good_fix_with_new_test_module.json").read_text())
        stays_red = json.loads((FIXTURES / "bad_half_up_stays_red.json").read_text())
        creates = stays_red["diff"] + good["diff"].split("--- /dev/null", 1)[1].join(["--- /dev/null", ""])
        proposal = tmp_path / "p.json"
        proposal.write_text(json.dumps(dict(stays_red, test_path="tests/test_prorate_floor.py", diff=creates)))
        before = tree(repo)
        result = gate(proposal, repo)
        assert result.code == "reverted", result.reason
        assert tree(repo) == before
        assert not (repo / "tests" / "test_prorate_floor.py").exists()
        leftovers = [p.name for p in repo.rglob("*") if p.suffix in (".orig", ".rej")]
        assert leftovers == []


class TestCommandLine:
    def test_default_repo_is_repo_in_the_current_folder(self, tmp_path, monkeypatch):
        shutil.copytree(HERE / "repo", tmp_path / "repo")
        monkeypatch.chdir(tmp_path)
        code = agent_contract.main([str(FIXTURES / "bad_behavior_typo.json")])
        assert code == agent_contract.EXIT_CODES["unknown-behavior"]

    def test_prints_code_colon_reason(self, repo, capsys):
        code = agent_contract.main([str(FIXTURES / "bad_invoice_already_green.json"), str(repo)])
        out = capsys.readouterr().out.strip()
        assert code == 5
        assert out.startswith("contract-green: ") and len(out.splitlines()) == 1
