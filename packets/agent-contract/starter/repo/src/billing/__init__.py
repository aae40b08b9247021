"""Billing helpers for the subscriptions service."""
