"""Drill plans: the typed models, the YAML loader with positions, and credential references.

``load_plan(path)`` is the way in; everything a caller needs is importable from here.
"""

from drills.plan.loader import *  # noqa: F403
from drills.plan.loader import __all__ as __all__
