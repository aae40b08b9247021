"""Checkout helpers."""
