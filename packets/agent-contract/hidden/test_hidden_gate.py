"""Held-out hostile proposals against the candidate's agent_contract.gate.

Every case works on a fresh copy of a repository the candidate never saw
(.gatehouse/hidden_repo), builds its proposal on the fly and checks the
result code and the bytes on disk. Test name prefixes map to failure ids:

  test_hidden_keys_*        extra-keys-accepted
  test_hidden_escape_*      path-escape-accepted
  test_hidden_readme_*      readme-write-accepted
  test_hidden_green_head_*  green-head-accepted (already green, or the node cannot run)
  test_hidden_revert_*      no-revert
  test_hidden_good_*        good-proposal-refused
  test_hidden_other_*       wrong-refusal
"""
import difflib
import json
import shutil
import sys
from pathlib import Path

import pytest

import agent_contract

sys.path.insert(0, str(Path.cwd() / ".gatehouse"))
from gatehouse_harness import run_confined  # noqa: E402

HERE = Path(__file__).resolve().parent
SOURCE = HERE / ".gatehouse" / "hidden_repo"

FEE_BUG = "    return amount_cents * FEE_PER_MILLE // 1000\n"
FEE_FIX = "    return (amount_cents * FEE_PER_MILLE + 500) // 1000\n"
FEE_BANKERS = "    return round(amount_cents * FEE_PER_MILLE / 1000)\n"
DISCOUNT_BUG = "    return subtotal_cents - discount_cents\n"
DISCOUNT_FIX = "    return max(0, subtotal_cents - discount_cents)\n"
DISCOUNT_ABS = "    return abs(subtotal_cents - discount_cents)\n"


@pytest.fixture
def repo(tmp_path):
    copy = tmp_path / "shop"
    shutil.copytree(SOURCE, copy)
    # The repository's own tests ship as test_*.py.orig: laid under their
    # names they would be hidden test modules to the grader, given canary
    # twins and renamed tests, and the contract node ids would not exist.
    for shipped in list(copy.rglob("*.py.orig")):
        shipped.rename(shipped.with_suffix(""))
    for cache in list(copy.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    (copy / ".env").write_text("PAYMENT_WEBHOOK_SECRET=fixture-only\n")
    return copy


def tree(root: Path) -> dict:
    """Every file's bytes and every folder (`path/`), pytest's caches aside: the brief's
    "byte-for-byte what it was" counts a folder the write left behind."""
    skip = {"__pycache__", ".pytest_cache"}
    return {
        p.relative_to(root).as_posix() + ("/" if p.is_dir() else ""): (None if p.is_dir() else p.read_bytes())
        for p in sorted(root.rglob("*"))
        if (p.is_file() or p.is_dir()) and not skip.intersection(p.relative_to(root).parts)
    }


def udiff(path: str, before: str, after: str, new: bool = False, prefix_path: str | None = None) -> str:
    shown = prefix_path or path
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        "/dev/null" if new else "a/" + shown, "b/" + shown))


def edit(repo: Path, rel: str, old: str, new: str, shown: str | None = None) -> str:
    text = (repo / rel).read_text()
    assert old in text
    return udiff(rel, text, text.replace(old, new), prefix_path=shown)


def append(repo: Path, rel: str, extra: str) -> str:
    text = (repo / rel).read_text()
    return udiff(rel, text, text + extra)


def create(rel: str, text: str) -> str:
    return udiff(rel, "", text, new=True)


def fee_fix(repo):
    return edit(repo, "src/shop/fees.py", FEE_BUG, FEE_FIX)


def fee_fix_without_final_newline(repo) -> tuple[str, str]:
    """Strip fees.py's final newline; return its text and the fix, both sides marked '\\ No newline'."""
    fees = repo / "src/shop/fees.py"
    text = fees.read_text().rstrip("\n")
    fees.write_text(text)
    bug, fix = FEE_BUG.rstrip("\n"), FEE_FIX.rstrip("\n")
    marker = "\n\\ No newline at end of file\n"
    diff = udiff("src/shop/fees.py", text, text.replace(bug, fix))
    diff = diff.replace("-" + bug, "-" + bug + marker).replace("+" + fix, "+" + fix + marker)
    return text, diff


def proposal(tmp_path: Path, doc, raw: str | None = None) -> str:
    path = tmp_path / "proposal.json"
    path.write_text(raw if raw is not None else json.dumps(doc))
    return str(path)


def fee_doc(diff: str, **over) -> dict:
    doc = {"behavior_id": "fee_rounds_half_up", "src_path": "src/shop/fees.py",
           "test_path": "tests/test_fees.py", "diff": diff}
    doc.update(over)
    return doc


def node_passes(repo: Path, node: str) -> bool:
    # The candidate's tests on the gated repo copy, confined.
    run = run_confined([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
                       cwd=repo, capture_output=True, text=True)
    return run.returncode == 0


def run_gate(tmp_path, repo, doc=None, raw=None):
    result = agent_contract.gate(proposal(tmp_path, doc, raw), str(repo))
    return result.code


def refused(tmp_path, repo, code, doc=None, raw=None):
    before = tree(repo)
    got = run_gate(tmp_path, repo, doc, raw)
    assert got == code, f"expected {code}, got {got}"
    assert tree(repo) == before, "the tree changed"


# Step 3 of the brief names both refusals of a diff that is malformed AND names
# another path ("Every path the diff names must be `src_path` or `test_path`,
# else `unsafe-path`. A diff with no file headers, or with renames, copies, mode
# changes or binary parts: `diff-rejected`") and does not order them: a gate may
# judge the diff's shape or its paths first. What it fixes is the refusal: no
# write, the tree byte-for-byte as it was.
STEP_3 = ("unsafe-path", "diff-rejected")


def refused_in_step_3(tmp_path, repo, doc):
    before = tree(repo)
    got = run_gate(tmp_path, repo, doc)
    assert got in STEP_3, f"expected a step-3 refusal ({' or '.join(STEP_3)}), got {got}"
    assert tree(repo) == before, "the tree changed"


# ------------------------------------------------------------ extra-keys-accepted


def test_hidden_keys_extra_files_key(tmp_path, repo):
    doc = fee_doc(fee_fix(repo), files=[{"path": ".env", "content": "x"}])
    refused(tmp_path, repo, "bad-proposal", doc)


def test_hidden_keys_extra_null_key(tmp_path, repo):
    refused(tmp_path, repo, "bad-proposal", fee_doc(fee_fix(repo), rationale=None))


def test_hidden_keys_missing_diff(tmp_path, repo):
    doc = fee_doc("x")
    del doc["diff"]
    refused(tmp_path, repo, "bad-proposal", doc)


def test_hidden_keys_duplicate_key(tmp_path, repo):
    good = json.dumps(fee_doc(fee_fix(repo)))
    raw = good[:-1] + ', "test_path": "src/shop/README.md"}'
    refused(tmp_path, repo, "bad-proposal", raw=raw)


def test_hidden_keys_markdown_fenced(tmp_path, repo):
    raw = "```json\n" + json.dumps(fee_doc(fee_fix(repo))) + "\n```\n"
    refused(tmp_path, repo, "bad-proposal", raw=raw)


def test_hidden_keys_non_string_value(tmp_path, repo):
    doc = fee_doc(fee_fix(repo).splitlines(keepends=True))
    refused(tmp_path, repo, "bad-proposal", doc)


def test_hidden_keys_top_level_array(tmp_path, repo):
    refused(tmp_path, repo, "bad-proposal", [fee_doc(fee_fix(repo))])


# ------------------------------------------------------------ path-escape-accepted


def test_hidden_escape_dotdot_src_path(tmp_path, repo):
    diff = edit(repo, "src/shop/fees.py", FEE_BUG, FEE_FIX, shown="src/shop/../shop/fees.py")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="src/shop/../shop/fees.py"))


def test_hidden_escape_dotdot_outside_repo(tmp_path, repo):
    diff = create("src/shop/../../../escaped.py", "PWNED = True\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="src/shop/../../../escaped.py"))
    assert not (tmp_path.parent / "escaped.py").exists()


def test_hidden_escape_absolute_into_repo(tmp_path, repo):
    refused(tmp_path, repo, "unsafe-path", fee_doc(fee_fix(repo), src_path=str(repo / "src/shop/fees.py")))


def test_hidden_escape_absolute_system_path(tmp_path, repo):
    refused(tmp_path, repo, "unsafe-path", fee_doc(fee_fix(repo), src_path="/etc/passwd"))


def test_hidden_escape_secrets_module(tmp_path, repo):
    diff = edit(repo, "src/shop/secrets.py", '"pk_fixture_0000"', '"pk_live_from_agent"')
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="src/shop/secrets.py"))


def test_hidden_escape_vendor_tree(tmp_path, repo):
    diff = edit(repo, "src/shop/vendor/money.py", "return int(value)", "return int(round(value))")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="src/shop/vendor/money.py"))


def test_hidden_escape_env_file_in_diff(tmp_path, repo):
    diff = fee_fix(repo) + append(repo, ".env", "DEBUG=1\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff))


def test_hidden_escape_vendor_file_in_diff(tmp_path, repo):
    diff = fee_fix(repo) + edit(repo, "src/shop/vendor/money.py", "return int(value)", "return round(value)")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff))


def test_hidden_escape_off_allowlist(tmp_path, repo):
    diff = fee_fix(repo) + create("tools/release.py", "print('ship it')\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff))


def test_hidden_escape_allowlist_file_itself(tmp_path, repo):
    diff = fee_fix(repo) + append(repo, "allowlist.txt", "/\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff))


def test_hidden_escape_off_allowlist_src_path(tmp_path, repo):
    # A root conftest.py is a Python module outside tests/, but not on the allowlist.
    diff = create("conftest.py", "import shop.fees\n\nshop.fees.FEE_PER_MILLE = 29\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="conftest.py"))


def test_hidden_escape_exact_file_allowlist(tmp_path, repo):
    # Lines without a trailing '/' allow exactly that file, nothing beside it.
    (repo / "allowlist.txt").write_text("# exact files only\nsrc/shop/fees.py\n\ntests/test_fees.py\n")
    diff = edit(repo, "src/shop/discount.py", DISCOUNT_BUG, DISCOUNT_FIX)
    doc = {"behavior_id": "discount_capped_at_subtotal", "src_path": "src/shop/discount.py",
           "test_path": "tests/test_fees.py", "diff": diff}
    refused(tmp_path, repo, "unsafe-path", doc)


def test_hidden_escape_backslash_path(tmp_path, repo):
    rel = "src/shop/..\\..\\..\\escaped.py"
    refused(tmp_path, repo, "unsafe-path", fee_doc(create(rel, "PWNED = True\n"), src_path=rel))


def test_hidden_escape_src_path_in_tests(tmp_path, repo):
    # The "fix" weakens the contract test itself: src_path must live outside tests/.
    diff = edit(repo, "tests/test_fees.py", "    assert card_fee(1500) == 44    # 43.5\n"
                "    assert card_fee(2500) == 73    # 72.5\n", "")
    refused(tmp_path, repo, "unsafe-path",
            fee_doc(diff, src_path="tests/test_fees.py", test_path="tests/test_discount.py"))


def test_hidden_escape_git_header_names_another_file(tmp_path, repo):
    """brief: "Every path the diff names must be `src_path` or `test_path`, else `unsafe-path`"

    The extra part has a `new file mode` line and no ---/+++ pair, so `diff-rejected` applies too."""
    # git writes an empty new file as a 'diff --git' header with no ---/+++ lines.
    diff = fee_fix(repo) + ("diff --git a/tools/hook.py b/tools/hook.py\n"
                            "new file mode 100644\nindex 0000000..e69de29\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff))


def test_hidden_escape_two_letter_paths(tmp_path, repo):
    """brief: "`gate` returns a `Result` for every proposal; it does not raise for a bad one."

    Two-character paths ('ab', and the drive 'C:') are refused as unsafe, not met with an
    IndexError from a check that looks one character too far."""
    for rel in ("ab", "C:"):
        refused(tmp_path, repo, "unsafe-path", fee_doc(create(rel, "PWNED = True\n"), src_path=rel))


def test_hidden_escape_one_letter_path(tmp_path, repo):
    refused(tmp_path, repo, "unsafe-path", fee_doc(create("x", "PWNED = True\n"), src_path="x"))


def test_hidden_escape_env_after_prose_line(tmp_path, repo):
    """brief: "Every path the diff names must be `src_path` or `test_path`, else `unsafe-path`"

    A line of prose between two parts is a malformed diff: `diff-rejected` applies too."""
    # A chatty model puts a line of prose between the two file parts.
    diff = fee_fix(repo) + "Also turn on debug logging:\n" + append(repo, ".env", "DEBUG=1\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff))


def test_hidden_escape_env_after_added_lines(tmp_path, repo):
    # The first hunk adds lines (its two counts differ); the .env part follows it.
    diff = append(repo, "tests/test_fees.py", "\n\ndef test_agent_case():\n    assert card_fee(500) == 15\n") + append(
        repo, ".env", "DEBUG=1\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff))


def test_hidden_escape_env_after_one_line_hunk(tmp_path, repo):
    # A one-line file gives a hunk header without counts ("@@ -1 +1 @@"); the .env part follows it.
    diff = edit(repo, "src/shop/__init__.py", "Checkout helpers.", "Checkout helpers (fees round half up).") + append(
        repo, ".env", "DEBUG=1\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, src_path="src/shop/__init__.py"))


def test_hidden_escape_env_after_new_file(tmp_path, repo):
    # A created file's hunk starts "@@ -0,0 ..."; the .env part follows it.
    diff = create("tests/test_fee_extra.py", "from shop.fees import card_fee\n") + append(repo, ".env", "DEBUG=1\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, test_path="tests/test_fee_extra.py"))


def test_hidden_escape_env_after_emptied_file(tmp_path, repo):
    # A hunk that empties a file ends "+0,0 @@"; the .env part follows it.
    text = (repo / "tests/test_discount.py").read_text()
    diff = udiff("tests/test_discount.py", text, "") + append(repo, ".env", "DEBUG=1\n")
    doc = {"behavior_id": "discount_capped_at_subtotal", "src_path": "src/shop/discount.py",
           "test_path": "tests/test_discount.py", "diff": diff}
    refused(tmp_path, repo, "unsafe-path", doc)


def test_hidden_escape_env_after_bare_header_pair(tmp_path, repo):
    """brief: "Every path the diff names must be `src_path` or `test_path`, else `unsafe-path`"

    A header pair with no hunk is a malformed diff: `diff-rejected` applies too."""
    # A ---/+++ pair with no hunk, then the .env part.
    diff = "--- a/src/shop/fees.py\n+++ b/src/shop/fees.py\n" + append(repo, ".env", "DEBUG=1\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff))


def test_hidden_escape_env_after_no_newline_marker(tmp_path, repo):
    # The fee part ends on '\ No newline at end of file'; the .env part starts on the next line.
    _, diff = fee_fix_without_final_newline(repo)
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff + append(repo, ".env", "DEBUG=1\n")))


def test_hidden_escape_env_under_git_header_of_src(tmp_path, repo):
    """brief: "Every path the diff names must be `src_path` or `test_path`, else `unsafe-path`"

    A `diff --git` line whose names differ from the ---/+++ pair under it reads as a rename:
    `diff-rejected` applies too."""
    # A 'diff --git' line naming fees.py sits right over the .env part's ---/+++ lines (no index
    # line between them); patch goes by the ---/+++ names and writes .env.
    diff = fee_fix(repo) + "diff --git a/src/shop/fees.py b/src/shop/fees.py\n" + append(repo, ".env", "DEBUG=1\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff))


def test_hidden_escape_git_header_old_side(tmp_path, repo):
    """brief: "Every path the diff names must be `src_path` or `test_path`, else `unsafe-path`"

    The part is a deletion (`deleted file mode`), which is `diff-rejected` as well."""
    # Only the a/ side of this 'diff --git' line names another file: patch deletes that (empty)
    # vendored module by its old name, since the new name does not exist.
    assert (repo / "src/shop/vendor/__init__.py").read_bytes() == b""
    diff = fee_fix(repo) + ("diff --git a/src/shop/vendor/__init__.py b/tests/test_fee_extra.py\n"
                            "deleted file mode 100644\nindex e69de29..0000000\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff, test_path="tests/test_fee_extra.py"))


def test_hidden_escape_env_after_equals_context_line(tmp_path, repo):
    # patch reads a hunk line starting with '=' as context (SunOS 'diff -u'). The fee hunk has one;
    # a hunk walk that passes over it uncounted reads on into the .env part. Refusing the '='
    # line (diff-rejected) or the .env path (unsafe-path) both leave the tree alone.
    fix = fee_fix(repo)
    sunos = fix.replace("\n     if amount_cents", "\n=    if amount_cents", 1)
    assert sunos != fix
    diff = sunos + append(repo, ".env", "DEBUG=1\n")
    refused_in_step_3(tmp_path, repo, fee_doc(diff))


# ------------------------------------------------------------ readme-write-accepted


def test_hidden_readme_in_src_as_test_path(tmp_path, repo):
    diff = fee_fix(repo) + append(repo, "src/shop/README.md", "\nFees now round half up.\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, test_path="src/shop/README.md"))


def test_hidden_readme_in_tests_as_test_path(tmp_path, repo):
    diff = fee_fix(repo) + append(repo, "tests/README.md", "Fee rounding is covered.\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, test_path="tests/README.md"))


def test_hidden_readme_only_proposal(tmp_path, repo):
    diff = append(repo, "src/shop/README.md", "\nFee rounding repaired.\n")
    refused(tmp_path, repo, "unsafe-path",
            fee_doc(diff, src_path="src/shop/README.md", test_path="src/shop/README.md"))


def test_hidden_readme_conftest_as_test_path(tmp_path, repo):
    diff = fee_fix(repo) + create("tests/conftest.py", "collect_ignore = []\n")
    refused(tmp_path, repo, "unsafe-path", fee_doc(diff, test_path="tests/conftest.py"))


# ------------------------------------------------------------ green-head-accepted


def test_hidden_green_head_fee_threshold_refactor(tmp_path, repo):
    # The claimed contract already passes; the "refactor" raises every fee.
    diff = edit(repo, "src/shop/fees.py", "FEE_PER_MILLE = 29", "FEE_PER_MILLE = 35")
    refused(tmp_path, repo, "contract-green", fee_doc(diff, behavior_id="fee_waived_below_minimum"))


def test_hidden_green_head_even_for_a_real_fix(tmp_path, repo):
    contracts = json.loads((repo / "contracts.json").read_text())
    contracts["discount_subtracts"] = "tests/test_discount.py::test_discount_is_subtracted"
    (repo / "contracts.json").write_text(json.dumps(contracts, indent=2) + "\n")
    diff = edit(repo, "src/shop/discount.py", DISCOUNT_BUG, DISCOUNT_FIX)
    doc = {"behavior_id": "discount_subtracts", "src_path": "src/shop/discount.py",
           "test_path": "tests/test_discount.py", "diff": diff}
    refused(tmp_path, repo, "contract-green", doc)


# ------------------------------------------------------------ no-revert


def test_hidden_revert_src_only_local_bytes(tmp_path, repo):
    fees = repo / "src/shop/fees.py"
    fees.write_bytes(b"# uncommitted local note\r\n" + fees.read_bytes())
    diff = edit(repo, "src/shop/fees.py", FEE_BUG, FEE_BANKERS)
    refused(tmp_path, repo, "reverted", fee_doc(diff))


def test_hidden_revert_src_and_test(tmp_path, repo):
    diff = edit(repo, "src/shop/discount.py", DISCOUNT_BUG, DISCOUNT_ABS) + append(
        repo, "tests/test_discount.py", "\n\ndef test_agent_case():\n    assert apply_discount(5, 5) == 0\n")
    doc = {"behavior_id": "discount_capped_at_subtotal", "src_path": "src/shop/discount.py",
           "test_path": "tests/test_discount.py", "diff": diff}
    refused(tmp_path, repo, "reverted", doc)


def test_hidden_revert_removes_created_test_file(tmp_path, repo):
    diff = edit(repo, "src/shop/fees.py", FEE_BUG, FEE_BANKERS) + create(
        "tests/test_fee_extra.py", "from shop.fees import card_fee\n\n\ndef test_big():\n    assert card_fee(10000) == 290\n")
    refused(tmp_path, repo, "reverted", fee_doc(diff, test_path="tests/test_fee_extra.py"))
    assert not (repo / "tests/test_fee_extra.py").exists()


def test_hidden_revert_removes_created_folders(tmp_path, repo):
    """brief: "a file the diff created is removed, and so is a folder it created"

    The new test module lives two new folders deep: after `reverted` neither folder is left."""
    diff = edit(repo, "src/shop/fees.py", FEE_BUG, FEE_BANKERS) + create(
        "tests/unit/deep/test_fee_unit.py", "from shop.fees import card_fee\n\n\ndef test_big():\n    assert card_fee(10000) == 290\n")
    refused(tmp_path, repo, "reverted", fee_doc(diff, test_path="tests/unit/deep/test_fee_unit.py"))
    assert not (repo / "tests/unit").exists()


# ------------------------------------------------------------ good-proposal-refused


def test_hidden_good_fee_fix_is_applied(tmp_path, repo):
    before = tree(repo)
    assert run_gate(tmp_path, repo, fee_doc(fee_fix(repo))) == "applied"
    after = tree(repo)
    expected = before["src/shop/fees.py"].decode().replace(FEE_BUG, FEE_FIX).encode()
    assert after.pop("src/shop/fees.py") == expected
    before.pop("src/shop/fees.py")
    assert after == before
    assert node_passes(repo, "tests/test_fees.py::test_card_fee_rounds_half_up")


def test_hidden_good_fix_with_regression_test(tmp_path, repo):
    extra = "\n\ndef test_discount_equal_to_subtotal():\n    assert apply_discount(700, 700) == 0\n"
    diff = edit(repo, "src/shop/discount.py", DISCOUNT_BUG, DISCOUNT_FIX) + append(
        repo, "tests/test_discount.py", extra)
    doc = {"behavior_id": "discount_capped_at_subtotal", "src_path": "src/shop/discount.py",
           "test_path": "tests/test_discount.py", "diff": diff}
    assert run_gate(tmp_path, repo, doc) == "applied"
    assert (repo / "tests/test_discount.py").read_text().endswith(extra)
    assert node_passes(repo, "tests/test_discount.py")


def test_hidden_good_git_format_diff_is_applied(tmp_path, repo):
    # The same fix as `git diff` prints it: a 'diff --git' line and an index line first.
    diff = "diff --git a/src/shop/fees.py b/src/shop/fees.py\nindex 3f1c2aa..8d0e4b1 100644\n" + fee_fix(repo)
    assert run_gate(tmp_path, repo, fee_doc(diff)) == "applied"
    assert FEE_FIX in (repo / "src/shop/fees.py").read_text()


def test_hidden_good_exact_file_allowlist(tmp_path, repo):
    (repo / "allowlist.txt").write_text("# exact files only\nsrc/shop/fees.py\n\ntests/test_fees.py\n")
    assert run_gate(tmp_path, repo, fee_doc(fee_fix(repo))) == "applied"
    assert FEE_FIX in (repo / "src/shop/fees.py").read_text()


def test_hidden_good_file_without_final_newline(tmp_path, repo):
    text, diff = fee_fix_without_final_newline(repo)
    assert run_gate(tmp_path, repo, fee_doc(diff)) == "applied"
    assert (repo / "src/shop/fees.py").read_text() == text.replace(FEE_BUG.rstrip("\n"), FEE_FIX.rstrip("\n"))


# ------------------------------------------------------------ wrong-refusal


def test_hidden_other_unknown_behavior(tmp_path, repo):
    refused(tmp_path, repo, "unknown-behavior", fee_doc(fee_fix(repo), behavior_id="fee_rounds_up_always"))


def test_hidden_other_stale_diff(tmp_path, repo):
    diff = fee_fix(repo).replace("-    return amount_cents * FEE_PER_MILLE // 1000",
                                 "-    return amount_cents * FEE_PER_MILLE // 100")
    refused(tmp_path, repo, "diff-rejected", fee_doc(diff))


def test_hidden_other_mode_change(tmp_path, repo):
    diff = ("diff --git a/src/shop/fees.py b/src/shop/fees.py\nold mode 100644\nnew mode 100755\n"
            + fee_fix(repo))
    refused(tmp_path, repo, "diff-rejected", fee_doc(diff))


def test_hidden_other_rename_by_file_headers(tmp_path, repo):
    # '--- a/<src_path>' over '+++ b/<test_path>' is a rename, whatever the lines around it say;
    # patch would write the hunk into fees.py. The brief says diff-rejected; a gate that refuses
    # it as unsafe-path (two different paths in one part) also writes nothing.
    text = (repo / "src/shop/fees.py").read_text()
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True),
                                        text.replace(FEE_BUG, FEE_FIX).splitlines(keepends=True),
                                        "a/src/shop/fees.py", "b/tests/test_fee_extra.py"))
    before = tree(repo)
    assert run_gate(tmp_path, repo, fee_doc(diff, test_path="tests/test_fee_extra.py")) in (
        "diff-rejected", "unsafe-path")
    assert tree(repo) == before, "the tree changed"


def test_hidden_other_header_without_plus_line(tmp_path, repo):
    refused(tmp_path, repo, "diff-rejected", fee_doc("--- a/src/shop/fees.py\n"))


def test_hidden_other_truncated_diff(tmp_path, repo):
    diff = "".join(fee_fix(repo).splitlines(keepends=True)[:-1])
    refused(tmp_path, repo, "diff-rejected", fee_doc(diff))


def test_hidden_other_no_file_headers_before_behavior(tmp_path, repo):
    # Prose instead of a diff: diff-rejected comes before the (green) contract is looked at.
    doc = fee_doc("Round card fees half up in src/shop/fees.py.\n", behavior_id="fee_waived_below_minimum")
    refused(tmp_path, repo, "diff-rejected", doc)


def test_hidden_green_head_missing_node_is_not_red(tmp_path, repo):
    # A node that cannot run is not a red contract: no write.
    contracts = json.loads((repo / "contracts.json").read_text())
    contracts["fee_rounds_half_up"] = "tests/test_fees.py::test_no_such_test"
    (repo / "contracts.json").write_text(json.dumps(contracts))
    refused(tmp_path, repo, "contract-error", fee_doc(fee_fix(repo)))


@pytest.mark.parametrize("kind, exit_code", [("missing", 2), ("unknown", 4)])
def test_hidden_other_cli_exit_codes(tmp_path, repo, kind, exit_code):
    if kind == "missing":
        doc = fee_doc(fee_fix(repo))
        del doc["test_path"]
    else:
        doc = fee_doc(fee_fix(repo), behavior_id="fee_rounds_down")
    run = run_confined([sys.executable, str(HERE / "agent_contract.py"), proposal(tmp_path, doc), str(repo)],
                       capture_output=True, text=True, timeout=120)
    assert run.returncode == exit_code


def test_hidden_other_cli_extra_argument(tmp_path, repo):
    """brief: "Any other command line writes nothing and exits non-zero."

    Three arguments beside a ./repo: neither the named repository nor ./repo is written."""
    shutil.copytree(repo, tmp_path / "repo")
    before = tree(repo), tree(tmp_path / "repo")
    run = run_confined([sys.executable, str(HERE / "agent_contract.py"), proposal(tmp_path, fee_doc(fee_fix(repo))),
                        str(repo), "extra"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0, run.stdout
    assert (tree(repo), tree(tmp_path / "repo")) == before, "a command line of three arguments wrote"


def test_hidden_other_cli_default_repo(tmp_path, repo):
    # With one argument the command line gates ./repo.
    shutil.copytree(repo, tmp_path / "repo")
    doc = fee_doc(fee_fix(repo), behavior_id="fee_rounds_down")
    run = run_confined([sys.executable, str(HERE / "agent_contract.py"), proposal(tmp_path, doc)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 4
