"""Readiness: the machinery that finds, runs, keeps and renders the checks, here; the checks
themselves (small functions that return a typed result) in ``areas``."""
