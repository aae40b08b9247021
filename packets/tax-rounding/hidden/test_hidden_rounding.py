"""Held-out rounding cases for add_tax: half up to a whole cent, exact for large values."""
import pytest

from taxlib.compute import add_tax


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
def test_hidden_rounds_half_up(cents, rate_bps, expected):
    assert add_tax(cents, rate_bps) == expected


def test_hidden_zero_rate_adds_nothing():
    assert add_tax(199, 0) == 199


def test_hidden_zero_cents_stay_zero():
    assert add_tax(0, 725) == 0


def test_hidden_full_rate_doubles():
    assert add_tax(12_345, 10_000) == 24_690


def test_hidden_large_values_are_exact():
    cents = 10**17 + 1
    # tax = (10**17 + 1) / 2 = 5 * 10**16 + 0.5 -> rounds up
    assert add_tax(cents, 5_000) == cents + 5 * 10**16 + 1


def test_hidden_returns_int():
    assert type(add_tax(199, 725)) is int
