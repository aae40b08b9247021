"""Vendored copy of an old money helper. Generated; do not edit by hand."""


def cents(value) -> int:
    return int(value)
