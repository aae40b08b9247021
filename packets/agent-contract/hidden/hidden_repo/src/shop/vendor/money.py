"""Vendored money helper (generated, pinned)."""


def to_cents(value) -> int:
    return int(value)
