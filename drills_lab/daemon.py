"""The lab's long-running process: `drills lab up` starts it detached.

Everything the lab runs lives in (or dies with) this one process, so
`drills lab down` has a single pid to stop and leaves nothing behind.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from drills.errors import LabError
from drills_lab.demand import DEFAULT_DAY_S
from drills_lab.runtime import Lab
from drills_lab.state import ERROR_FILE, STATE_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drills-lab-daemon")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--drift", action="store_true")
    parser.add_argument("--drift-scheduling", action="store_true")
    parser.add_argument("--drift-capacity", action="store_true")
    parser.add_argument("--day-seconds", type=float, default=DEFAULT_DAY_S)
    parser.add_argument("--drift-training", action="store_true")
    parser.add_argument("--ready-delay", type=float, default=1.0)
    parser.add_argument("--no-system-services", action="store_true")
    parser.add_argument("--checkpoint-every", type=float, default=60.0)
    parser.add_argument("--no-reverse-replication", action="store_true")
    parser.add_argument("--audit", action="store_true")
    parser.add_argument("--dns", choices=("auto", "external-dns"), default="auto")
    parser.add_argument("--dns-sync-interval", type=float, default=3.0)
    parser.add_argument("--low-priority-work", action="store_true")
    parser.add_argument("--no-slo", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per seeded blob is noise
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    lab = Lab(
        args.state_dir,
        drift=args.drift,
        drift_scheduling=args.drift_scheduling,
        drift_capacity=args.drift_capacity,
        day_seconds=args.day_seconds,
        drift_training=args.drift_training,
        ready_delay=args.ready_delay,
        use_system_services=not args.no_system_services,
        checkpoint_every_s=args.checkpoint_every,
        reverse_replication=not args.no_reverse_replication,
        audit=args.audit,
        dns=args.dns,
        dns_sync_interval=args.dns_sync_interval,
        low_priority_work=args.low_priority_work,
        slo=not args.no_slo,
    )
    try:
        lab.start()
    except LabError as exc:
        (args.state_dir / ERROR_FILE).write_text(f"{exc}\n")
        logging.getLogger("drills_lab").error("lab failed to start: %s", exc)
        return 1
    stop.wait()
    lab.stop()
    (args.state_dir / STATE_FILE).unlink(missing_ok=True)
    logging.getLogger("drills_lab").info("lab stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
