"""taxlib: small helpers for sales tax on integer cents."""
from .compute import add_tax

__all__ = ["add_tax"]
