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
    is imported from its module when first asked for, then kept on the package."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def attribute(name: str) -> object:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
