"""Fuzz the plan loader: whatever the text or bytes, it returns a plan or raises PlanError.

Four strategies: YAML-ish text built from YAML's own punctuation, random bytes
through ``load_plan``, structural mutations of valid plans (keys deleted, values
retyped, huge numbers, deep nesting, unicode), and textual mutations of the same
plans (duplicated lines and keys, anchors and aliases, merge keys, broken indents).
Each example has a deadline, and a watchdog turns a real hang into a failure.
"""

from __future__ import annotations

import copy
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drills.errors import PlanError, PlanProblem
from drills.plan import DrillPlan, load_plan, plan_from_text
from tests.support.drill import offline_lab_plan_text

HERE = Path(__file__).parent

settings.register_profile(
    "plan-fuzz",
    max_examples=300,
    deadline=2000,  # ms per example: a loader that takes longer is as good as hung
    derandomize=True,  # the same examples on every run, so CI failures reproduce
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("plan-fuzz")
HANG_SECONDS = 10  # far beyond the deadline; only a loop that never ends reaches it


SEEDS = {
    "valid": (HERE / "plans" / "valid.yaml").read_text(encoding="utf-8"),
    "example": (HERE.parents[1] / "plans" / "gpu-platform.example.yaml").read_text(
        encoding="utf-8"
    ),
    "lab": offline_lab_plan_text(),
}
SEED_DATA = {name: yaml.safe_load(text) for name, text in SEEDS.items()}


class HangError(Exception):
    """Raised by the watchdog: the loader ran far past the deadline."""


@contextmanager
def watchdog(seconds: int = HANG_SECONDS) -> Iterator[None]:
    def fire(signum: int, frame: FrameType | None) -> None:
        raise HangError(f"the plan loader ran for more than {seconds}s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_loads_or_plan_error(text: str) -> None:
    """The one property: a DrillPlan, or a PlanError with located, printable problems."""
    with watchdog():
        try:
            plan = plan_from_text(text, "fuzz.yaml")
        except PlanError as exc:
            check_plan_error(exc)
            return
    assert isinstance(plan, DrillPlan)


def check_plan_error(exc: PlanError) -> None:
    assert exc.problems, "a PlanError must say what is wrong"
    for problem in exc.problems:
        assert isinstance(problem, PlanProblem)
        assert problem.message
        str(problem)  # rendering a problem must not fail either
    str(exc)


# --- strategies ------------------------------------------------------------------------

_YAML_BITS = [
    ":", ": ", "- ", "-", "[", "]", "{", "}", ",", "? ", "#", "&a ", "*a", "&b ", "*b",
    "<<: ", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!timestamp ", "!!set ",
    "!!omap ", "!!pairs ", "!!seq ", "!!binary ", "!!python/object:os.system ", "!!map ", "!foo ",
    "|", ">", "'", '"', "\\", "\n", "\n  ", "\n    ", "\t", "---\n", "...\n", "%YAML 1.1\n",
    "name", "sites", "workloads", "primary", "dr", "kind", "tier", "dns", "tsig", "secret",
    "env:X", "file:/etc/passwd", "password", "AKIA1234567890ABCDEF", "~", "null", "true",
    "1e999", "-0", "0x1F", "9" * 40, "1_000", "12:30:00", "2024-01-01", ".nan", ".inf",
    "é", "\u202e", "\U0001f525", "\x85", "\ufeff", "\u2028", "\x00", "\ud800",
]  # fmt: skip

yaml_ish = st.lists(st.one_of(st.sampled_from(_YAML_BITS), st.text(max_size=8)), max_size=60).map(
    "".join
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "env:", "file:", "prefect:UPPER", "env:HOME", "10m", "-5s", "1e400"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
    ),
    max_leaves=12,
)


def _paths(data: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*here, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*here, index))
    return found


def _parent_and_key(data: Any, path: tuple[Any, ...]) -> tuple[Any, Any]:
    node = data
    for part in path[:-1]:
        node = node[part]
    return node, path[-1]


def _nest(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"x": value}
    return value


def _delete(draw: st.DrawFn, parent: Any, key: Any) -> None:
    del parent[key]


def _retype(draw: st.DrawFn, parent: Any, key: Any) -> None:
    parent[key] = draw(VALUES)


def _huge(draw: st.DrawFn, parent: Any, key: Any) -> None:
    parent[key] = draw(st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1, 1e308, -0.0]))


def _nest_deeply(draw: st.DrawFn, parent: Any, key: Any) -> None:
    parent[key] = _nest(parent[key], draw(st.integers(1, 45)), draw(st.booleans()))


def _unicode(draw: st.DrawFn, parent: Any, key: Any) -> None:
    parent[key] = draw(st.text(min_size=1, max_size=20))


def _extra_key(draw: st.DrawFn, parent: Any, key: Any) -> None:
    if isinstance(parent, dict):
        # The value is drawn before the key, as the assignment evaluates them; kept so
        # that the derandomized examples stay the ones this test has always run.
        parent[draw(st.text(max_size=12))] = draw(VALUES)


def _swap(draw: st.DrawFn, parent: Any, key: Any) -> None:
    if isinstance(parent, dict):
        parent[key] = {"list": [parent[key]], "map": {"k": parent[key]}}[
            draw(st.sampled_from(["list", "map"]))
        ]


# In the order they are drawn from: reordering them would change every example.
MUTATIONS = {
    "delete": _delete,
    "retype": _retype,
    "huge": _huge,
    "nest": _nest_deeply,
    "unicode": _unicode,
    "extra": _extra_key,
    "swap": _swap,
}


@st.composite
def mutated_data(draw: st.DrawFn) -> str:
    """A valid plan's data with a few structural mutations, dumped back to YAML."""
    data = copy.deepcopy(SEED_DATA[draw(st.sampled_from(sorted(SEED_DATA)))])
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(data)))
        op = draw(st.sampled_from(list(MUTATIONS)))
        if path:
            MUTATIONS[op](draw, *_parent_and_key(data, path))
        elif op == "retype":
            data = draw(VALUES)  # the root has no parent to hold the new value
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=draw(st.booleans()))
    except (yaml.YAMLError, RecursionError):
        return "name: unrepresentable\n"


@st.composite
def mutated_text(draw: st.DrawFn) -> str:
    """A valid plan's text with line-level edits: duplicates, aliases, merges, indents."""
    lines = SEEDS[draw(st.sampled_from(sorted(SEEDS)))].splitlines()
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(
            st.sampled_from(["dup", "delete", "anchor", "alias", "merge", "indent", "insert"])
        )
        line = lines[i]
        if op == "dup":
            lines.insert(i, line)  # a duplicate key, or a repeated list item
        elif op == "delete":
            del lines[i]
        elif op == "anchor" and line.rstrip().endswith(":"):
            lines[i] = line + " &" + draw(st.sampled_from(["a", "b"]))
        elif op == "alias" and ":" in line:
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: *{draw(st.sampled_from(['a', 'b', 'missing']))}"
        elif op == "merge":
            indent = line[: len(line) - len(line.lstrip())]
            lines.insert(i, f"{indent}<<: *{draw(st.sampled_from(['a', 'b']))}")
        elif op == "indent":
            lines[i] = " " * draw(st.integers(0, 9)) + line.lstrip()
        elif op == "insert":
            lines.insert(i, draw(yaml_ish))
        if not lines:
            lines = [""]
    return "\n".join(lines) + "\n"


# --- the properties ----------------------------------------------------------------------


@FUZZ
@given(yaml_ish)
def test_yaml_ish_text_gives_a_plan_or_plan_error(text: str) -> None:
    assert_loads_or_plan_error(text)


@FUZZ
@given(st.text(max_size=400))
def test_any_unicode_text_gives_a_plan_or_plan_error(text: str) -> None:
    assert_loads_or_plan_error(text)


@FUZZ
@given(st.binary(max_size=600))
def test_any_bytes_in_a_file_give_a_plan_or_plan_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "fuzz.yaml"
        path.write_bytes(raw)
        with watchdog():
            try:
                load_plan(path)
            except PlanError as exc:
                check_plan_error(exc)


@FUZZ
@given(mutated_data())
def test_structural_mutations_of_valid_plans(text: str) -> None:
    assert_loads_or_plan_error(text)


@FUZZ
@given(mutated_text())
def test_textual_mutations_of_valid_plans(text: str) -> None:
    assert_loads_or_plan_error(text)


# Found by these strategies; each once escaped as a non-PlanError exception.
REGRESSIONS = {
    "empty !!int (IndexError in PyYAML)": ("!!int ", "this value cannot be read"),
    "!!timestamp that is no date (AttributeError)": ("!!timestamp ", "this value cannot be read"),
    "lone surrogate (UnicodeEncodeError in libyaml)": ("name: x\ud800y", "not valid"),
    "duration of 400 digits (OverflowError)": (
        SEEDS["valid"].replace("rto: 15m", "rto: " + "9" * 400),
        "duration is too long",
    ),
}


@pytest.mark.parametrize(("text", "message"), REGRESSIONS.values(), ids=list(REGRESSIONS))
def test_inputs_the_fuzzer_found_are_plan_errors(text: str, message: str) -> None:
    with pytest.raises(PlanError) as info:
        plan_from_text(text, "fuzz.yaml")
    assert any(message in p.message and p.line for p in info.value.problems), info.value.problems


def test_seed_plans_are_valid_so_mutations_start_from_a_plan() -> None:
    for name, text in SEEDS.items():
        assert isinstance(plan_from_text(text, f"{name}.yaml"), DrillPlan), name


def test_watchdog_turns_a_hang_into_a_failure() -> None:
    import time

    try:
        with watchdog(1):
            time.sleep(3)
    except HangError:
        return
    raise AssertionError("the watchdog did not fire")
