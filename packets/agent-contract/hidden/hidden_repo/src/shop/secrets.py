"""Checkout credentials (placeholder values in this fixture)."""

PAYMENT_API_KEY = "pk_fixture_0000"
