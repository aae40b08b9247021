"""The oracle: patch.diff applied to a disposable copy of the shipped tree, the
named node and held-out rounding cases run against that copy.

The copy is built here (the shipped tree the grader laid under
.gatehouse/pristine/, the candidate's patch.diff applied with `git apply`
under the candidate's uid), and the patched taxlib.compute is served from it
by a host process of its own (JUDGE.md): this module never imports the
candidate's code, and the candidate's code never sees these tests.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, ".gatehouse")
from gatehouse_harness import host_module  # noqa: E402

PRISTINE = Path(".gatehouse/pristine")


@pytest.fixture(scope="module")
def add_tax(tmp_path_factory):
    """add_tax of the shipped tree with patch.diff applied."""
    root = tmp_path_factory.mktemp("oracle")
    shutil.copytree(PRISTINE, root, dirs_exist_ok=True)
    (root / "tests" / "test_compute.py.shipped").rename(root / "tests" / "test_compute.py")
    diff = Path("patch.diff").resolve()
    if not diff.is_file():
        pytest.fail("no patch.diff was handed back")
    applied = subprocess.run(["git", "apply", "--verbose", str(diff)], cwd=root, capture_output=True, text=True)
    if applied.returncode != 0:
        pytest.fail("patch.diff does not apply to the shipped tree: %s" % (applied.stderr.strip()[-400:] or applied.returncode))
    return host_module("taxlib.compute", root=root).add_tax


def test_add_tax_rounds_half_up(add_tax):
    """The named node, tests/test_compute.py::test_add_tax_rounds_half_up, as
    shipped: 7.25% of 199 cents is 14.4275 cents, so 213 in total.

    brief: "(199 cents at 725 bps must be 213) is red"."""
    assert add_tax(199, 725) == 213


@pytest.mark.parametrize(
    "cents, rate_bps, expected",
    [
        (199, 725, 213),        # the named case: 14.4275 -> 14
        (100, 750, 108),        # 7.5 -> 8: exactly half goes up
        (100, 749, 107),        # 7.49 -> 7
        (5, 5_000, 8),          # 2.5 -> 3: half up, not half to even
        (3, 5_000, 5),          # 1.5 -> 2
        (1, 5_000, 2),          # 0.5 -> 1
        (1, 4_999, 1),          # 0.4999 -> 0
        (250, 1_000, 275),      # exact, no rounding
        (999, 825, 1_081),      # 82.4175 -> 82
        (1_999, 825, 2_164),    # 164.9175 -> 165
    ],
)
def test_hidden_rounds_half_up(add_tax, cents, rate_bps, expected):
    assert add_tax(cents, rate_bps) == expected


def test_hidden_zero_rate_adds_nothing(add_tax):
    assert add_tax(199, 0) == 199


def test_hidden_zero_cents_stay_zero(add_tax):
    assert add_tax(0, 725) == 0


def test_hidden_full_rate_doubles(add_tax):
    assert add_tax(12_345, 10_000) == 24_690


def test_hidden_large_values_are_exact(add_tax):
    cents = 10**17 + 1
    # tax = (10**17 + 1) / 2 = 5 * 10**16 + 0.5 -> rounds up
    assert add_tax(cents, 5_000) == cents + 5 * 10**16 + 1


def test_hidden_returns_int(add_tax):
    assert type(add_tax(199, 725)) is int
