"""A REST client of the session's Prefect test server, for the tests of state changes and
of the warm runner's claims."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from drills.orchestrator.rest import PrefectRest


@pytest.fixture(scope="module")
def api_url(prefect_harness: None) -> str:
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value()).rstrip("/")


@pytest.fixture
def api(api_url: str) -> Iterator[PrefectRest]:
    with PrefectRest(api_url) as rest:
        yield rest
