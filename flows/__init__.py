"""Prefect flows: thin wrappers over the drills library."""
