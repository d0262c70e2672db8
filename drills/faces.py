"""The faces of the adapter subpackages (kube, registry, objects, dns): names loaded on use.

Each subpackage's ``__init__`` names what the rest of drills uses from it, and the other
packages import those names from there. A face imports none of its modules until one of
its names is asked for, because most of them load an SDK (kubernetes, boto3, httpx,
dnspython, the Azure SDK): importing the package for a quantity parser or an image
reference must cost what importing that one module costs, and `drills --help` none.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_face(package: str, homes: Mapping[str, Sequence[str]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` (module → its names)
    is imported from its module when first asked for, then kept on the package. A name
    written ``"up as serve_up"`` is the module's ``up``, known on the face as ``serve_up``
    (a name that says, beside the rest of the package, what it is)."""
    home_of: dict[str, tuple[str, str]] = {}
    for module, entries in homes.items():
        for entry in entries:
            own, _, alias = entry.partition(" as ")
            home_of[alias or own] = (module, own)

    def attribute(name: str) -> object:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, own = home
        value = getattr(importlib.import_module(f"{package}.{module}"), own)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
