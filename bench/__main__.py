"""Run every benchmark in bench/ (or those named on the command line): ``python -m bench``."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

import bench


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = [m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")]
    chosen = argv or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; have: {', '.join(names)}")
        return 2
    failed = 0
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name}", flush=True)
        failed += int(bool(module.main()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
