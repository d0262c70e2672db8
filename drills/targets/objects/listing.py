"""Key-ordered S3 listings, sharded by prefix and fetched concurrently, in bounded memory.

A flat listing of a large prefix is one request after another, each waiting on the
last one's continuation token. S3 (and moto, which re-sorts the bucket for every
page) answers far faster when the listing is split by "directory": the root of the
prefix is listed with ``Delimiter="/"``, and each common prefix it names (a shard)
is listed by its own worker thread. Shards are handed to the consumer in key
order, so the result is still one stream sorted by key, which a merge-join needs.

Memory stays bounded whatever the bucket holds: a shard worker may run at most
``pages_per_shard`` pages ahead of the consumer, and at most ``shards_ahead``
shards (plus the one being read) are in flight. ``BufferGauge`` counts the entries
held between the threads and the consumer, so a test can assert on the bound.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from drills.errors import PermanentError

log = logging.getLogger("drills.targets.objects")

_POLL_S = 0.1  # how often a blocked producer looks whether the consumer went away
_MAX_DESCENT = 16  # lone wrapper directories followed down before sharding anyway


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


E = TypeVar("E", bound=Keyed)


@dataclass(frozen=True)
class Page(Generic[E]):
    """One listing response: entries in key order, common prefixes, the next token."""

    entries: Sequence[E]
    prefixes: Sequence[str] = ()
    token: object = None  # where the next page starts; None on the last page


# (prefix, delimited, token of the page to fetch, None for the first) -> one page
PageFetcher = Callable[[str, bool, object], "Page[E]"]


@dataclass(frozen=True)
class ListingLimits:
    """How much one listing may fetch ahead of its consumer."""

    page_size: int = 1000  # S3's own maximum per request
    # Requests in flight per listing (a comparison runs two). More does not list a
    # CPU-bound server (moto, a one-node MinIO) any faster; it only pushes answers
    # past the read timeout, and the retries add load.
    shards_ahead: int = 4
    pages_per_shard: int = 2  # pages a worker may queue before it waits

    @property
    def buffer_bound(self) -> int:
        """The most entries one listing holds at any moment.

        At most ``shards_ahead + 2`` segments are alive (queued, in the lister's
        hand, and being read); each holds at most ``pages_per_shard`` queued pages,
        one in its worker's hand and one being read. The lister's current root
        page adds one more page.
        """
        per_segment = self.pages_per_shard + 2
        return self.page_size * ((self.shards_ahead + 2) * per_segment + 1)


@dataclass
class BufferGauge:
    """Entries fetched but not yet consumed, and the most there ever were at once."""

    current: int = 0
    high_water: int = 0
    pages: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fetched(self, count: int) -> None:
        with self._lock:
            self.pages += 1
            self.current += count
            self.high_water = max(self.high_water, self.current)

    def consumed(self, count: int) -> None:
        with self._lock:
            self.current -= count


@dataclass(frozen=True)
class _Failure:
    error: BaseException


class _End:
    """Marks the end of a shard's pages, or of the segments."""


_END = _End()


class _PageChain:
    """Guards one paginated listing against a store whose pages never end.

    A buggy or hostile S3 look-alike may answer the same page with the same
    continuation token forever, or hand out fresh tokens for pages that go back in
    key order. Either would spin a comparison until someone noticed; both are a
    broken store, so the listing fails at once instead, saying where.
    """

    def __init__(self, target: str, prefix: str, *, unique_keys: bool) -> None:
        self._target = target
        self._prefix = prefix
        # A version listing may split one key's versions over two pages; objects never.
        self._unique_keys = unique_keys
        self._tokens: set[object] = set()
        self._last_key: str | None = None

    def check(self, asked_with: object, page: Page[E]) -> None:
        where = f"the listing of {self._prefix!r}"
        if page.token is not None:
            if page.token == asked_with or page.token in self._tokens:
                raise PermanentError(
                    self._target,
                    f"{where} repeats: a page handed back a continuation token already "
                    f"used, so the pages would never end ({len(self._tokens) + 1} pages read)",
                )
            self._tokens.add(page.token)
        if page.entries:
            first, last = page.entries[0].key, self._last_key
            if last is not None and (first < last or (self._unique_keys and first == last)):
                raise PermanentError(
                    self._target,
                    f"{where} does not move forward: a page starts at {first!r}, "
                    f"not after {last!r} where the page before it ended",
                )
            self._last_key = page.entries[-1].key


def _put(channel: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put, waiting while the channel is full; False once the consumer has gone."""
    while not stop.is_set():
        try:
            channel.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _segments(entries: Sequence[E], prefixes: Sequence[str]) -> Iterator[list[E] | str]:
    """One delimited page as runs of entries and shard prefixes, in key order.

    A key without a delimiter after the prefix can never sort inside a shard's
    range (every key there contains the shard prefix), so runs and shards interleave
    without overlapping.
    """
    run: list[E] = []
    shards = iter(prefixes)
    shard = next(shards, None)
    for entry in entries:
        while shard is not None and shard < entry.key:
            if run:
                yield run
                run = []
            yield shard
            shard = next(shards, None)
        run.append(entry)
    if run:
        yield run
    while shard is not None:
        yield shard
        shard = next(shards, None)


class Listing(Iterator[E]):
    """A listing under way: its threads fetch ahead while it is iterated.

    ``close()`` (also on exhaustion, on an error, and when garbage collected)
    releases the producers and lets their threads end.
    """

    def __init__(
        self, entries: Iterator[E], stop: threading.Event, workers: ThreadPoolExecutor
    ) -> None:
        self._entries = entries
        self._stop = stop
        self._workers = workers

    def __next__(self) -> E:
        try:
            return next(self._entries)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._stop.set()  # producers blocked on a full queue give up
        self._workers.shutdown(wait=False, cancel_futures=True)

    def __del__(self) -> None:
        self.close()


class OrderedListing(Generic[E]):
    """Iterate every entry under a prefix in key order (see the module docstring).

    ``fetch(prefix, delimited, token)`` lists one page. With ``shard=False`` the
    prefix is listed flat, still fetched ahead of the consumer in its own thread,
    so two listings consumed side by side run concurrently.
    """

    def __init__(
        self,
        fetch: PageFetcher[E],
        prefix: str,
        *,
        limits: ListingLimits,
        shard: bool = True,
        gauge: BufferGauge | None = None,
        name: str = "listing",
        target: str = "",
        unique_keys: bool = True,
    ) -> None:
        self._fetch = fetch
        self._prefix = prefix
        self._limits = limits
        self._shard = shard
        self.gauge = gauge or BufferGauge()
        self._name = name
        self._target = target or name
        self._unique_keys = unique_keys

    def __iter__(self) -> Listing[E]:
        return self.start()

    def start(self) -> Listing[E]:
        """Start fetching now, before the first entry is asked for.

        A comparison starts both sides' listings at once this way, rather than
        the second only once the first has answered.
        """
        stop = threading.Event()
        segments: queue.Queue[object] = queue.Queue(maxsize=self._limits.shards_ahead)
        workers = ThreadPoolExecutor(
            max_workers=self._limits.shards_ahead, thread_name_prefix=f"{self._name}-shard"
        )
        walker = threading.Thread(
            target=self._walk,
            args=(segments, workers, stop),
            name=f"{self._name}-walk",
            daemon=True,
        )
        walker.start()
        return Listing(self._read(segments), stop, workers)

    def _read(self, segments: queue.Queue[object]) -> Iterator[E]:
        while True:
            segment = segments.get()
            if segment is _END:
                return
            if isinstance(segment, _Failure):
                raise segment.error
            if isinstance(segment, list):
                yield from segment
                self.gauge.consumed(len(segment))
                continue
            assert isinstance(segment, queue.Queue)
            while True:
                page = segment.get()
                if page is _END:
                    break
                if isinstance(page, _Failure):
                    raise page.error
                assert isinstance(page, Page)
                yield from page.entries
                self.gauge.consumed(len(page.entries))

    def _root(self, stop: threading.Event) -> Iterator[Page[E]]:
        """The pages of the root listing, descending through lone wrapper directories.

        A prefix that fits in one flat page is answered by that page: sharding it
        would cost a request per directory for nothing. A prefix whose only content
        is one directory (``runs/`` holding just ``runs/llama-8b/``) would otherwise
        become a single shard: no parallelism.
        """
        prefix = self._prefix
        if self._shard:
            probe = self._fetch(prefix, False, None)
            if probe.token is None:
                yield probe
                return
        for _ in range(_MAX_DESCENT):
            page = self._fetch(prefix, self._shard, None)
            lone = (
                self._shard
                and not page.entries
                and len(page.prefixes) == 1
                and page.token is None
                and len(page.prefixes[0]) > len(prefix)  # a store looping on itself stops here
            )
            if not lone:
                break
            prefix = page.prefixes[0]
        chain = _PageChain(self._target, prefix, unique_keys=self._unique_keys)
        chain.check(None, page)
        while True:
            yield page
            if page.token is None or stop.is_set():
                return
            token = page.token
            page = self._fetch(prefix, self._shard, token)
            chain.check(token, page)

    def _walk(
        self, segments: queue.Queue[object], workers: ThreadPoolExecutor, stop: threading.Event
    ) -> None:
        try:
            for page in self._root(stop):
                self.gauge.fetched(len(page.entries))
                for segment in _segments(page.entries, page.prefixes):
                    item: object = segment
                    if isinstance(segment, str):
                        item = queue.Queue(maxsize=self._limits.pages_per_shard)
                        workers.submit(self._list_shard, segment, item, stop)
                    if not _put(segments, item, stop):
                        return
            _put(segments, _END, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises
            _put(segments, _Failure(exc), stop)

    def _list_shard(self, prefix: str, pages: queue.Queue[object], stop: threading.Event) -> None:
        try:
            token: object = None
            chain = _PageChain(self._target, prefix, unique_keys=self._unique_keys)
            while not stop.is_set():
                page = self._fetch(prefix, False, token)
                chain.check(token, page)
                self.gauge.fetched(len(page.entries))
                if not _put(pages, page, stop):
                    return
                if page.token is None:
                    break
                token = page.token
            _put(pages, _END, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises
            _put(pages, _Failure(exc), stop)
