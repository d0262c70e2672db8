"""Run every benchmark in bench/ (or those named on the command line): ``python -m bench``.

Options after one benchmark's name go to that benchmark (``python -m bench drill_overhead
--compare REV``); a benchmark that takes options has a ``cli(argv)`` beside its ``main()``.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

import bench


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = [m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")]
    options_at = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    chosen, options = argv[:options_at] or names, argv[options_at:]
    if options:
        return _run_with_options(chosen, options)
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


def _run_with_options(chosen: list[str], options: list[str]) -> int:
    if len(chosen) != 1:
        print(
            "options go to one benchmark, named before them: python -m bench NAME "
            + " ".join(options)
        )
        return 2
    try:
        module = importlib.import_module(f"bench.{chosen[0]}")
    except ModuleNotFoundError:
        print(f"unknown benchmark: {chosen[0]}")
        return 2
    if not hasattr(module, "cli"):
        print(f"{chosen[0]} takes no options")
        return 2
    print(f"== {chosen[0]}", flush=True)
    return int(module.cli(options))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
