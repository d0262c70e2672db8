"""What the flows share about Prefect artifacts."""

from __future__ import annotations

import re


def artifact_key(kind: str, plan: str) -> str:
    """Prefect artifact keys allow only lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]", "-", f"{kind}-{plan}".lower())
