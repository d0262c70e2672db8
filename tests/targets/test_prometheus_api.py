"""Prometheus's HTTP API for the plan's own expressions, against a real Prometheus: what
parses, what one sample is, and every answer that cannot be trusted an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.errors import TargetError
from drills.targets.prometheus_api import instant_value, parse_problem
from tests.support.faultproxy import FaultProxy
from tests.support.not_found import NotFoundServer
from tests.support.prometheus_target import METRIC, MetricTarget, prometheus_scraping


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    target = MetricTarget()
    target.value = 0.25
    with prometheus_scraping(Path(tmp_path_factory.mktemp("api-prometheus")), target) as url:
        yield url
    target.close()


def test_the_parser_message_is_prometheus_own(prometheus: str) -> None:
    assert parse_problem(prometheus, f"max({METRIC})") is None
    assert (
        parse_problem(prometheus, "sum(rate(x[5m])")
        == "1:16: parse error: unclosed left parenthesis"
    )
    problem = parse_problem(prometheus, "up >> 1")
    assert problem is not None and "parse error" in problem


def test_one_sample_is_a_value(prometheus: str) -> None:
    assert instant_value(prometheus, f"max({METRIC})") == 0.25
    assert instant_value(prometheus, "scalar(vector(3))") == 3.0


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        (f"{METRIC} > 100", "no sample"),  # nothing matches: not a pass
        (f"{METRIC} or label_replace({METRIC}, 'x', 'y', '', '')", "2 series"),
        ("sum(rate(x[5m])", "bad_data"),
    ],
)
def test_answers_that_are_not_one_sample_are_errors(prometheus: str, expr: str, words: str) -> None:
    with pytest.raises(TargetError, match=words):
        instant_value(prometheus, expr)


def test_a_404_or_no_answer_is_an_error_never_a_value(prometheus: str, closed_port: str) -> None:
    with NotFoundServer() as server, pytest.raises(TargetError, match="not a Prometheus answer"):
        instant_value(server.url, "vector(1)")
    with NotFoundServer() as server, pytest.raises(TargetError, match="not a Prometheus answer"):
        parse_problem(server.url, "vector(1)")
    with pytest.raises(TargetError):
        instant_value(f"http://{closed_port}", "vector(1)")
    with FaultProxy(prometheus.removeprefix("http://"), http=True) as proxy:
        proxy.answer_next(1, 503)
        with pytest.raises(TargetError, match="not a Prometheus answer"):
            instant_value(f"http://{proxy.address}", "vector(1)")
        assert instant_value(f"http://{proxy.address}", "vector(1)") == 1.0
