"""Readiness checks: small functions that return a typed result."""
