"""Drill plans: valid plans load; malformed ones are reported exactly, and only as PlanError."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from drills.errors import PlanError, PlanProblem, TargetError
from drills.plan import (
    DrillPlan,
    EcrRegistry,
    Rfc2136Dns,
    Route53Dns,
    SecretRef,
    Tier,
    load_plan,
    plan_digest,
    plan_from_text,
    plan_schema,
)
from drills.plan.durations import format_duration, parse_duration
from drills.plan.error_translation import CREDENTIAL_KEY_HINT
from drills.plan.refs import LITERAL_CREDENTIAL, resolve_secret

HERE = Path(__file__).parent
VALID_FILE = HERE / "plans" / "valid.yaml"
EXAMPLE_FILE = HERE.parents[1] / "plans" / "gpu-platform.example.yaml"
VALID = VALID_FILE.read_text(encoding="utf-8")
SOURCE = "plan.yaml"


def altered(old: str, new: str) -> str:
    assert VALID.count(old) == 1, f"fixture text {old!r} is not unique"
    return VALID.replace(old, new)


def position(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first character of ``needle`` in ``text``."""
    index = text.index(needle)
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def problems_of(text: str) -> list[PlanProblem]:
    with pytest.raises(PlanError) as info:
        plan_from_text(text, SOURCE)
    return info.value.problems


def problem(text: str, needle: str, path: str, message: str) -> PlanProblem:
    line, column = position(text, needle)
    return PlanProblem(SOURCE, line, column, path, message)


# --- valid plans -----------------------------------------------------------------------


def test_valid_plan_loads_with_typed_values() -> None:
    plan = load_plan(VALID_FILE)
    assert plan.name == "test-plan"
    assert [w.name for w in plan.workloads_in(Tier.CRITICAL)] == ["inference-gateway"]
    assert [w.key for w in plan.writers] == ["training/trainer"]
    assert plan.dr_gpus() == 8 and plan.dr_gpus("critical") == 0
    assert plan.datasets[0].rpo_target == 900.0 and plan.datasets[0].min_versions == 3
    assert plan.objectives.rto == 900.0 and plan.approval.timeout == 7200.0
    assert plan.smoke[0].timeout == 30.0 and plan.smoke[0].expect_status == 200
    assert isinstance(plan.dns, Rfc2136Dns) and plan.dns.record.name == "api.drills.test."
    assert plan.dns.tsig.secret.kind == "file" and plan.dns.tsig.secret.value == "tsig.secret"
    assert plan.source_dir == VALID_FILE.parent.resolve()
    assert (
        plan.resolve_path("primary.kubeconfig")
        == VALID_FILE.parent.resolve() / "primary.kubeconfig"
    )
    assert plan.resolve_path("/etc/x") == Path("/etc/x")
    assert list(plan.secret_refs()) == [("dns.tsig.secret", "file:tsig.secret")]
    with pytest.raises(ValidationError):
        plan.model_copy().__setattr__("name", "other")  # frozen


def test_example_plan_validates() -> None:
    plan = load_plan(EXAMPLE_FILE)
    assert isinstance(plan.dns, Route53Dns)
    assert isinstance(plan.sites.dr.registry, EcrRegistry)
    # DR inherits the registry through a YAML merge key, and its region from its own aws section.
    assert plan.sites.dr.registry_region == "us-west-2"
    assert plan.approval.required and plan.schedule is not None
    assert {w.tier for w in plan.workloads} == set(Tier)
    assert all(ref.kind in ("env", "file", "prefect") for _, ref in plan.secret_refs())


def test_digest_is_stable_and_sensitive() -> None:
    first, again = load_plan(VALID_FILE), plan_from_text(VALID, "elsewhere.yaml")
    assert plan_digest(first) == plan_digest(again)
    assert len(plan_digest(first)) == 64
    changed = plan_from_text(altered("rto: 15m", "rto: 16m"), SOURCE)
    assert plan_digest(changed) != plan_digest(first)


def test_schema_describes_the_plan() -> None:
    schema = plan_schema()
    assert {"name", "sites", "workloads", "dns", "objectives"} <= set(schema["required"])
    assert "_source_dir" not in schema["properties"]


def test_merge_keys_and_durations_forms() -> None:
    text = altered(
        "  dr:\n    kubernetes:", "  dr:\n    <<: {endpoint: http://x:1/}\n    kubernetes:"
    )
    text = text.replace("max_ttl: 60s", "max_ttl: 90").replace("rpo: 5m", "rpo: 1h30m")
    plan = plan_from_text(text, SOURCE)
    assert plan.sites.dr.endpoint == "http://127.0.0.3:18080/healthz"  # explicit key wins
    assert plan.dns.max_ttl == 90.0 and plan.objectives.rpo == 5400.0
    assert parse_duration("2d") == 172800.0 and format_duration(5400) == "1h30m"


# --- malformed plans: one exact problem each ----------------------------------------------


CASES = yaml.safe_load((HERE / "plans" / "malformed.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_malformed_plan_reports_exact_problem(case: dict[str, str]) -> None:
    text = altered(case["old"], case["new"])
    assert problems_of(text) == [problem(text, case["needle"], case["path"], case["message"])]


def test_missing_name_points_at_the_top_mapping() -> None:
    text = altered("name: test-plan\n", "")
    assert problems_of(text) == [
        problem(text, "description:", "name", "missing required field `name`")
    ]


def test_unknown_field_suggests_the_right_one() -> None:
    text = altered("    dr_replicas: 2\n", "    dr_replicaz: 2\n")
    assert problems_of(text) == [
        problem(
            text,
            "name: inference-gateway",
            "workloads[0].dr_replicas",
            "missing required field `dr_replicas`",
        ),
        problem(
            text,
            "dr_replicaz",
            "workloads[0].dr_replicaz",
            "unknown field `dr_replicaz`; did you mean `dr_replicas`?",
        ),
    ]


def test_duplicate_key_names_both_lines() -> None:
    text = altered("    dr_replicas: 2\n", "    dr_replicas: 2\n    dr_replicas: 3\n")
    first_line, _ = position(text, "dr_replicas: 2")
    assert problems_of(text) == [
        problem(
            text,
            "dr_replicas: 3",
            "workloads[0].dr_replicas",
            f"duplicate key `dr_replicas` (first defined on line {first_line})",
        )
    ]


def test_duplicate_key_does_not_hide_other_problems() -> None:
    text = altered("    dr_replicas: 2\n", "    dr_replicas: 2\n    dr_replicas: 3\n")
    text = text.replace("tier: critical", "tier: urgent")
    assert [(p.path, p.message.split(" (")[0]) for p in problems_of(text)] == [
        ("workloads[0].tier", "must be one of: critical, normal, batch"),
        ("workloads[0].dr_replicas", "duplicate key `dr_replicas`"),
    ]


def test_yaml_syntax_error_is_located() -> None:
    text = "name: x\nworkloads: [a, b\nsites: {}\n"
    assert problems_of(text) == [
        PlanProblem(
            SOURCE,
            3,
            6,
            "",
            "invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence)",
        )
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", PlanProblem(SOURCE, None, None, "", "the plan file is empty")),
        ("# only a comment\n", PlanProblem(SOURCE, None, None, "", "the plan file is empty")),
        (
            "- a\n- b\n",
            PlanProblem(
                SOURCE,
                1,
                1,
                "",
                "the plan must be a mapping of fields (name, sites, workloads, ...), not a list",
            ),
        ),
        (
            "just words",
            PlanProblem(
                SOURCE,
                1,
                1,
                "",
                "the plan must be a mapping of fields "
                "(name, sites, workloads, ...), not a single value",
            ),
        ),
    ],
    ids=["empty", "comments only", "list", "scalar"],
)
def test_documents_that_are_not_plans(text: str, expected: PlanProblem) -> None:
    assert problems_of(text) == [expected]


# --- credentials stay out of plans, and out of messages ----------------------------------


def test_literal_password_is_refused_without_echoing_it() -> None:
    secret = "hunter2-correct-horse"
    text = altered(
        "      url: http://127.0.0.1:5001\n",
        f"      url: http://127.0.0.1:5001\n      auth: {{username: bob, password: {secret}}}\n",
    )
    with pytest.raises(PlanError) as info:
        plan_from_text(text, SOURCE)
    assert info.value.problems == [
        problem(text, secret, "sites.primary.registry.auth.password", LITERAL_CREDENTIAL)
    ]
    assert secret not in str(info.value)
    assert "env:NAME, file:PATH or prefect:BLOCK" in str(info.value)


def test_literal_password_is_hidden_from_direct_pydantic_errors_too() -> None:
    data = {"username": "bob", "password": "hunter2-correct-horse"}
    from drills.plan import OciAuth

    with pytest.raises(ValidationError) as info:
        OciAuth.model_validate(data)
    assert "hunter2" not in str(info.value)


def test_aws_key_id_is_refused_anywhere() -> None:
    key = "AKIAIOSFODNN7EXAMPLE"
    text = altered('description: "A small plan for tests"', f'description: "rotate {key} soon"')
    problems = problems_of(text)
    assert problems == [
        problem(
            text,
            '"rotate',
            "description",
            "looks like an AWS access key id; give a reference such as "
            "env:NAME, file:PATH or prefect:BLOCK",
        )
    ]
    assert key not in str(problems)
    text = altered("    dr_replicas: 2\n", f"    dr_replicas: 2\n    {key}: x\n")
    problems = problems_of(text)
    assert problems == [
        problem(
            text,
            key,
            "workloads[0].<key not shown>",
            "this key looks like an AWS access key id; give a reference "
            "such as env:NAME, file:PATH or prefect:BLOCK",
        )
    ]
    assert key not in str(problems)


def test_url_with_password_and_pem_key_are_refused() -> None:
    text = altered("url: http://127.0.0.1:5002", "url: http://ci:s3cr3tpw@127.0.0.1:5002")
    text = text.replace('"A small plan for tests"', '"-----BEGIN OPENSSH PRIVATE KEY-----"')
    problems = problems_of(text)
    assert [(p.path, p.message.split(";")[0]) for p in problems] == [
        ("description", "contains a PEM private key"),
        ("sites.dr.registry.url", "contains a URL with a password (user:password@)"),
    ]
    assert "s3cr3tpw" not in str(problems)


def test_unknown_credential_like_key_is_refused() -> None:
    text = altered("    dr_replicas: 2\n", "    dr_replicas: 2\n    api_key: sk-live-1234567890\n")
    problems = problems_of(text)
    assert problems == [
        problem(
            text,
            "sk-live",
            "workloads[0].api_key",
            f"unknown field `api_key` here; {CREDENTIAL_KEY_HINT}; "
            "its value looks like a literal credential",
        )
    ]
    assert "sk-live" not in str(problems)


def test_secret_refs_resolve_from_env_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("tok-value\n", encoding="utf-8")
    monkeypatch.setenv("DRILLS_TEST_TOKEN", "env-value")
    assert resolve_secret(SecretRef.parse("file:token"), tmp_path) == "tok-value"
    assert resolve_secret(SecretRef.parse("env:DRILLS_TEST_TOKEN"), tmp_path) == "env-value"
    monkeypatch.delenv("DRILLS_TEST_TOKEN")
    with pytest.raises(TargetError) as info:
        resolve_secret(SecretRef.parse("env:DRILLS_TEST_TOKEN"), tmp_path)
    assert str(info.value) == (
        "secret reference env:DRILLS_TEST_TOKEN: environment variable DRILLS_TEST_TOKEN is not set"
    )
    with pytest.raises(TargetError, match="does not exist"):
        resolve_secret(SecretRef.parse("file:missing"), tmp_path)


# --- files and hostile input -----------------------------------------------------------


def test_four_problems_are_reported_together() -> None:
    path = HERE / "plans" / "many-problems.yaml"
    with pytest.raises(PlanError) as info:
        load_plan(path)
    found = [(p.line, p.column, p.path) for p in info.value.problems]
    assert found == [
        (2, 7, "name"),
        (6, 15, "sites.primary.registry"),
        (14, 14, "sites.dr.ingress.deployment"),
        (17, 65, "workloads[0].tier"),
        (18, 12, "workloads[1].name"),
        (18, 86, "workloads[1].dr_replicas"),
        (26, 13, "dns.dr_value"),
        (27, 29, "objectives.rpo"),
    ]
    assert all(p.file == str(path) for p in info.value.problems)


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as info:
        load_plan(tmp_path / "absent.yaml")
    assert [p.message for p in info.value.problems] == ["the plan file does not exist"]
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(b"name: x\ndescription: caf\xe9\n")
    with pytest.raises(PlanError) as info:
        load_plan(latin)
    assert info.value.problems == [
        PlanProblem(str(latin), 2, 17, "", "the plan file is not UTF-8 text (byte 0xe9)")
    ]


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    started = time.monotonic()
    problems = problems_of("\n".join(lines) + "\n")
    assert time.monotonic() - started < 5
    assert problems == [
        PlanProblem(
            SOURCE,
            8,  # the anchor whose repetition costs most: &h, repeated by i
            4,
            "",
            "aliases (*name) expand this file by more than 100,000 values, far beyond "
            "any plan; the anchor here is repeated 10 times",
        )
    ]


def test_deep_nesting_is_refused() -> None:
    problems = problems_of("a: " + "[" * 5000 + "]" * 5000)
    assert len(problems) == 1 and "nesting depth" in problems[0].message
    problems = problems_of("a: " + "[" * 60 + "]" * 60)
    assert [p.message for p in problems] == ["the plan is nested more than 40 levels deep"]


@pytest.mark.parametrize(
    "text",
    [
        "name: !!python/object:os.system x",
        "name: " + "9" * 5000,
        "name: 1e999\nworkloads: {a: 1}",
        "? [a, b]\n: c",
        "name: x\x00y",
        "~: 1",
        "a: &x [*x]",
        "<<: 5",
        "workloads:\n  - name: [1, {2: 3}]\n    dr_replicas: 99999999999999999999999999",
    ],
)
def test_hostile_yaml_raises_only_plan_error(text: str) -> None:
    assert problems_of(text)


def test_random_bytes_raise_only_plan_error(tmp_path: Path) -> None:
    rng = random.Random(6)
    base = VALID.encode("utf-8")
    target = tmp_path / "fuzz.yaml"
    for _ in range(60):
        data = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        target.write_bytes(bytes(data) if rng.random() < 0.8 else os.urandom(200))
        try:
            load_plan(target)
        except PlanError as exc:
            assert exc.problems and all(isinstance(p, PlanProblem) for p in exc.problems)


def test_plan_model_direct_construction_validates_rules() -> None:
    data = plan_from_text(VALID, SOURCE).model_dump(mode="json")
    data["workloads"].append(dict(data["workloads"][0]))
    with pytest.raises(ValidationError) as info:
        DrillPlan.model_validate(data)
    assert [e["loc"] for e in info.value.errors()] == [("workloads", 2, "name")]


@pytest.mark.parametrize(
    ("namespace", "hidden"),
    [
        ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("n" * 200, "n" * 41),
    ],
    ids=["aws key id", "long"],
)
def test_duplicate_item_message_does_not_echo_credentials_or_long_values(
    namespace: str, hidden: str
) -> None:
    item = "  - name: inference-gateway\n    namespace: serving\n"
    twice = f"  - name: inference-gateway\n    namespace: {namespace}\n"
    text = altered(item, twice + twice)
    duplicates = [p for p in problems_of(text) if "duplicate workload" in p.message]
    assert len(duplicates) == 1
    assert "not shown" in duplicates[0].message
    assert "inference-gateway" in duplicates[0].message
    assert all(hidden not in str(p) for p in problems_of(text))


def test_duplicate_item_message_names_a_plain_item() -> None:
    item = "  - name: inference-gateway\n    namespace: serving\n"
    text = altered(item, item + item.replace("  - name", "  - dr_replicas: 1\n    name"))
    duplicates = [p for p in problems_of(text) if "duplicate workload" in p.message]
    assert [p.message for p in duplicates] == [
        "duplicate workload `serving/inference-gateway` (already listed as workloads[0])"
    ]


def test_problems_found_after_loading_are_located_by_field_path() -> None:
    plan = plan_from_text(VALID, SOURCE)
    found = plan.problem_at("dns.tsig.secret", "does not resolve")
    assert (found.file, found.path) == (SOURCE, "dns.tsig.secret")
    assert (found.line, found.column) == position(VALID, "file:tsig.secret")
    second = plan.problem_at("workloads[1].name", "x")
    assert (second.line, second.column) == position(VALID, "trainer")
    # A field the file leaves out (a default) points at the nearest section written.
    assert plan.problem_at("dns.tsig.absent", "x").line == found.line
    assert plan.problem_at("nowhere.at.all", "x").line == plan.problem_at("", "x").line
