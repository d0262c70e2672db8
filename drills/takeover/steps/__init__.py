"""Mutating steps of a drill: changes applied through the journal, and undone from it."""
