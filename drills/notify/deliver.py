"""Delivering notices with Apprise: in the background, retried within a bound, never raising.

A run hands its notices to :func:`notify` and goes on at once: the targets are resolved
(a ``prefect:`` reference may ask a server) and the messages sent by a daemon thread of
this process. Each batch gets ``DEADLINE_S`` for all its messages, every attempt
included; each attempt's connect and read timeouts are cut to what is left of it. A
message not delivered by then is logged and recorded as not delivered; nothing is
raised into the run. At exit the process waits at most ``EXIT_FLUSH_S`` for messages
still going, then leaves them.

An Apprise URL holds its service's token, so it is never logged, printed, stored or put
in a message: a target is shown by a label (the reference that named it, and the URL's
scheme and host when the host is a host name or an address, never a path or user info).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from drills.errors import DrillError
from drills.notify.events import Notice, Severity
from drills.notify.render import UI_URL_ENV, render
from drills.plan import DrillPlan
from drills.plan.durations import parse_duration
from drills.targets.probe import is_ip
from drills.text import first_line, split_url

log = logging.getLogger("drills.notify")

NOTIFY_ENV = "DRILLS_NOTIFY"
REMIND_ENV = "DRILLS_NOTIFY_REMIND"
DEADLINE_S = 10.0  # for a whole batch of messages, every attempt included
ATTEMPTS = 3
CONNECT_S = 4.0
READ_S = 5.0
BACKOFF_S = 0.5  # doubled after each failed attempt
EXIT_FLUSH_S = 5.0  # the longest a process waits at exit for messages still going

DeliveryStatus = Literal["delivered", "not delivered", "pending"]


@dataclass(frozen=True)
class Target:
    label: str
    url: str = field(repr=False)


@dataclass(frozen=True)
class Delivery:
    """What became of one message to one target."""

    target: str  # the target's label, never its URL
    title: str
    status: DeliveryStatus
    attempts: int = 0
    detail: str = ""

    def describe(self) -> str:
        text = f"{self.target}: {self.status}"
        if self.attempts:
            text += f" after {self.attempts} attempt{'s' if self.attempts > 1 else ''}"
        return text + (f" ({self.detail})" if self.detail else "") + f" — {self.title}"


class Batch:
    """The deliveries of one call to :func:`notify`, filled in as they happen."""

    def __init__(self, titles: Sequence[str] = ()) -> None:
        self.titles = tuple(titles)
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._deliveries: list[Delivery] = []
        self._targets: list[str] | None = None
        if not titles:
            self._done.set()

    def __getstate__(self) -> dict[str, Any]:
        # A report that holds a batch is cached (the dashboard pickles it): what was
        # delivered so far travels, the lock and the event do not.
        with self._lock:
            return {"titles": self.titles, "deliveries": list(self._deliveries)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(())  # type: ignore[misc]
        self.titles = tuple(state["titles"])
        self._deliveries = list(state["deliveries"])
        self._targets = sorted({d.target for d in self._deliveries})

    def _start(self, targets: Sequence[str]) -> None:
        with self._lock:
            self._targets = list(targets)

    def _add(self, delivery: Delivery) -> None:
        with self._lock:
            self._deliveries.append(delivery)

    def _finish(self) -> None:
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float = EXIT_FLUSH_S) -> tuple[Delivery, ...]:
        """Every delivery, waiting at most ``timeout`` s; those still going are ``pending``."""
        self._done.wait(timeout)
        with self._lock:
            found = list(self._deliveries)
            seen = {(d.target, d.title) for d in found}
            pending = [
                Delivery(target, title, "pending", detail="still being sent")
                for title in self.titles
                for target in (self._targets if self._targets is not None else ["(targets)"])
                if (target, title) not in seen
            ]
        return tuple(found + pending)


class Plugin(Protocol):
    socket_connect_timeout: float
    socket_read_timeout: float

    def notify(self, *, body: str, title: str, notify_type: Any) -> bool: ...


@functools.cache
def _load_apprise() -> None:
    """Import Apprise and its plugins (and so `requests`) in the caller's thread, once.

    Imported for the first time in the sender's thread, beside a run whose own threads
    import `requests` through other SDKs, the two imports can meet in a cycle; Python
    then hands one of them a half-initialised module, and that run fails with an
    ImportError (seen: a drill ended by `cannot import name 'parse_dict_header'`).
    """
    import apprise  # noqa: F401
    from apprise.manager_plugins import NotificationManager

    NotificationManager().load_modules()


def apprise_plugin(url: str) -> Plugin | None:
    """Apprise's plugin for ``url``, keeping nothing on disk; None when it is not one."""
    import apprise

    asset = apprise.AppriseAsset(storage_mode=apprise.PersistentStoreMode.MEMORY)
    plugin: Any = apprise.Apprise.instantiate(url, asset=asset)
    if plugin is None:
        return None
    plugin.request_rate_per_sec = 0  # our own backoff paces the attempts
    return plugin


_HOSTNAME = re.compile(r"(?=.{1,253}$)([a-z0-9-]{1,63}\.)+[a-z]{2,24}", re.IGNORECASE)


def target_label(url: str, origin: str) -> str:
    """``origin → scheme://host[:port]``: the host only when it is a host name or an address
    (many Apprise URLs put a token where the host goes: ``tgram://TOKEN/CHAT``)."""
    parts = split_url(url)
    if parts is None:
        return f"{origin} → (not a URL)"
    scheme, _userinfo, hostpath, _query, _fragment = parts
    authority = hostpath.split("/", 1)[0]
    host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    host = host or authority
    shown = scheme if re.fullmatch(r"[a-z][a-z0-9+.-]{0,30}", scheme, re.I) else "?"
    if is_ip(host.strip("[]")) or host == "localhost" or _HOSTNAME.fullmatch(host):
        shown += f"://{host}" + (f":{port}" if port.isdigit() else "")
    else:
        shown += "://…"
    return f"{origin} → {shown}"


def split_targets(text: str) -> list[str]:
    """Apprise URLs in a comma- or space-separated list (a comma inside a URL's query,
    such as ``to=a@x,b@y``, stays in that URL)."""
    from apprise.utils.parse import parse_urls

    return [u for u in parse_urls(text) if u]


def resolve_targets(
    plan: DrillPlan | None, env_value: str | None
) -> tuple[list[Target], list[Delivery]]:
    """Targets from ``DRILLS_NOTIFY`` and the plan's ``notify:`` references; a reference
    that cannot be read is a delivery that failed, named by the reference."""
    targets: list[Target] = []
    problems: list[Delivery] = []
    for i, url in enumerate(split_targets(env_value or ""), 1):
        targets.append(Target(target_label(url, f"{NOTIFY_ENV}#{i}"), url))
    for ref in plan.notify if plan is not None else ():
        try:
            value = plan.resolve_secret(ref)  # type: ignore[union-attr]
        except DrillError as exc:
            problems.append(Delivery(ref, "(every message)", "not delivered", 0, str(exc)))
            continue
        urls = split_targets(value)
        for i, url in enumerate(urls, 1):
            origin = ref if len(urls) == 1 else f"{ref}#{i}"
            targets.append(Target(target_label(url, origin), url))
    return targets, problems


_NOTIFY_TYPES = {
    Severity.INFO: "info",
    Severity.SUCCESS: "success",
    Severity.WARNING: "warning",
    Severity.FAILURE: "failure",
}


@dataclass
class _Job:
    notices: tuple[Notice, ...]
    plan: DrillPlan | str | None  # a plan, or the path of one to load in the background
    env_value: str | None
    ui_url: str | None
    batch: Batch


class Sender:
    """One daemon thread that delivers batches in order, each within ``deadline_s``."""

    def __init__(
        self,
        *,
        deadline_s: float = DEADLINE_S,
        attempts: int = ATTEMPTS,
        plugin: Callable[[str], Plugin | None] = apprise_plugin,
    ) -> None:
        self.deadline_s = deadline_s
        self.attempts = attempts
        self._plugin = plugin
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._idle = threading.Condition()
        self._busy = 0
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(
        self,
        notices: Sequence[Notice],
        plan: DrillPlan | str | None,
        env_value: str | None,
        ui_url: str | None = None,
    ) -> Batch:
        batch = Batch([render(n, ui_url)[0] for n in notices])
        if not notices:
            return batch
        _load_apprise()
        with self._idle:
            self._busy += 1
        self._queue.put(_Job(tuple(notices), plan, env_value, ui_url, batch))
        self._ensure_thread()
        return batch

    def flush(self, timeout: float = EXIT_FLUSH_S) -> bool:
        """Wait at most ``timeout`` s for every batch to finish; False if some are still going."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name="drills-notify", daemon=True
                )
                self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            try:
                self._deliver_batch(job)
            except Exception:  # a bug here must not kill the thread and strand later batches
                log.exception("notification batch failed")
            finally:
                job.batch._finish()
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _deliver_batch(self, job: _Job) -> None:
        deadline = time.monotonic() + self.deadline_s
        plan, problems = _load(job.plan)
        targets, unreadable = resolve_targets(plan, job.env_value)
        problems += unreadable
        job.batch._start([t.label for t in targets])
        for problem in problems:
            log.warning("notification target %s: %s", problem.target, problem.detail)
            job.batch._add(problem)
        failed: set[str] = set()  # a target that failed once is not tried again in this batch
        for notice in job.notices:
            title, body = render(notice, job.ui_url)
            for target in targets:
                if target.label in failed:
                    job.batch._add(
                        Delivery(target.label, title, "not delivered", 0, "failed earlier")
                    )
                    continue
                delivery = self._deliver(target, title, body, notice.severity, deadline)
                if delivery.status != "delivered":
                    failed.add(target.label)
                level = logging.INFO if delivery.status == "delivered" else logging.WARNING
                log.log(level, "notification %s", delivery.describe())
                job.batch._add(delivery)

    def _deliver(
        self, target: Target, title: str, body: str, severity: Severity, deadline: float
    ) -> Delivery:
        plugin = self._plugin(target.url)
        if plugin is None:
            return Delivery(target.label, title, "not delivered", 0, "not an Apprise URL")
        attempts, cause = 0, "the service refused it or could not be reached"
        while attempts < self.attempts:
            left = deadline - time.monotonic()
            if left <= 0.05:
                cause = f"the {self.deadline_s:g}s delivery deadline passed"
                break
            attempts += 1
            plugin.socket_connect_timeout = min(CONNECT_S, left)
            plugin.socket_read_timeout = min(READ_S, left)
            try:
                if plugin.notify(body=body, title=title, notify_type=_NOTIFY_TYPES[severity]):
                    return Delivery(target.label, title, "delivered", attempts)
            except Exception as exc:  # noqa: BLE001 - third-party plugin code: reported by type only
                cause = f"{type(exc).__name__} in the Apprise plugin"
            time.sleep(max(0.0, min(BACKOFF_S * 2 ** (attempts - 1), deadline - time.monotonic())))
        return Delivery(target.label, title, "not delivered", attempts, cause)


_SENDER: Sender | None = None
_SENDER_LOCK = threading.Lock()
_LISTENERS: list[Callable[[Notice], None]] = []


def sender() -> Sender:
    """The process's sender, made on first use; the process flushes it at exit."""
    global _SENDER
    with _SENDER_LOCK:
        if _SENDER is None:
            _SENDER = Sender()
            atexit.register(_SENDER.flush, EXIT_FLUSH_S)
        return _SENDER


def subscribe(listener: Callable[[Notice], None]) -> Callable[[], None]:
    """Call ``listener`` with every notice this process sends (the flows turn them into
    Prefect events). Returns the function that unsubscribes it."""
    _LISTENERS.append(listener)
    return lambda: _LISTENERS.remove(listener)


def _load(plan: DrillPlan | str | None) -> tuple[DrillPlan | None, list[Delivery]]:
    if not isinstance(plan, str):
        return plan, []
    from drills.plan import load_plan

    try:
        return load_plan(plan), []
    except DrillError as exc:
        first = first_line(exc)
        return None, [Delivery("plan notify:", "(every message)", "not delivered", 0, first)]


def configured(plan: DrillPlan | str | None) -> bool:
    if isinstance(plan, str):
        return True  # its `notify:` is read in the background
    return bool(os.environ.get(NOTIFY_ENV, "").strip()) or bool(plan is not None and plan.notify)


def notify(notices: Iterable[Notice], plan: DrillPlan | str | None = None) -> Batch:
    """Send ``notices`` to ``DRILLS_NOTIFY`` and the plan's targets, in the background.

    ``plan`` may be the path of a plan file: it is then loaded in the background.

    Returns at once, never raises: what becomes of each message is in the returned
    :class:`Batch`, and in the ``drills.notify`` log.
    """
    notices = tuple(notices)
    for notice in notices:
        for listener in list(_LISTENERS):
            try:
                listener(notice)
            except Exception:  # a listener is someone else's code; the run goes on
                log.exception("notice listener failed on %s", notice.kind)
    if not notices or not configured(plan):
        return Batch()
    try:
        ui_url = os.environ.get(UI_URL_ENV, "")
        return sender().submit(notices, plan, os.environ.get(NOTIFY_ENV), ui_url)
    except Exception:  # nothing about a message may fail the run that sends it
        log.exception("notifications could not be queued")
        return Batch()


def remind_after() -> float | None:
    """``DRILLS_NOTIFY_REMIND`` in seconds (a duration such as ``4h``), or None: no reminders."""
    text = os.environ.get(REMIND_ENV, "").strip()
    if not text or text in ("0", "off"):
        return None
    try:
        return parse_duration(text)
    except ValueError:
        log.warning("%s=%r is not a duration (such as 4h or 1d): no reminders", REMIND_ENV, text)
        return None
