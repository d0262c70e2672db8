"""Dangerous plans that used to validate (tracker issue 11, item 7), strict durations, exact
cron cadence, the same thing given twice, warnings, and unknown-key suggestions."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills.cli.plan_cmd import register
from drills.errors import PlanError, PlanProblem
from drills.plan import DrillPlan, PlanWarning, load_plan, plan_from_text, plan_warnings
from drills.plan.cron import cadence, next_fire_times
from drills.plan.durations import parse_duration
from drills.plan.error_translation import CREDENTIAL_KEY_HINT, fields_at
from tests.plan.test_plan import SOURCE, VALID, altered, position, problems_of

register(app)
runner = CliRunner()


def only_problem(text: str) -> PlanProblem:
    problems = problems_of(text)
    assert len(problems) == 1, problems
    return problems[0]


def warnings_of(text: str) -> list[tuple[str, str]]:
    return [(w.path, w.code) for w in plan_from_text(text, SOURCE).warnings]


# --- nothing behind the switch ---------------------------------------------------------------


def test_a_critical_workload_with_no_dr_replicas_is_an_error() -> None:
    text = altered("    dr_replicas: 2\n", "    dr_replicas: 0\n")
    found = only_problem(text)
    assert (found.line, found.column) == position(text, "0\n  - name: trainer")
    assert found.path == "workloads[0].dr_replicas"
    assert found.message.startswith("a critical workload needs at least 1 DR replica")


def test_a_plan_where_only_batch_would_come_up_is_an_error() -> None:
    text = altered("    tier: critical\n", "    tier: batch\n")
    text = text.replace("    dr_replicas: 1\n    writer", "    dr_replicas: 0\n    writer")
    found = only_problem(text)
    assert found.path == "workloads"
    assert "nothing behind it" in found.message


def test_a_normal_workload_may_have_no_dr_replicas() -> None:
    text = altered("    dr_replicas: 1\n    writer", "    dr_replicas: 0\n    writer")
    assert plan_from_text(text, SOURCE).workloads[1].dr_replicas == 0


@pytest.mark.parametrize(("gpu", "replicas"), [(64, 10_000), (64, 1_563), (16, 6_251)])
def test_more_gpus_than_any_cluster_is_an_error(gpu: int, replicas: int) -> None:
    text = altered("    dr_replicas: 1\n    writer: true\n    gpu: 8", "")
    text = text.replace(
        "    kind: StatefulSet\n    tier: normal\n",
        f"    kind: StatefulSet\n    tier: normal\n    dr_replicas: {replicas}\n"
        f"    writer: true\n    gpu: {gpu}",
    )
    found = only_problem(text)
    assert found.path == "workloads[1].dr_replicas"
    assert f"{gpu * replicas:,} GPUs at DR" in found.message


def test_a_large_but_real_gpu_pool_is_fine() -> None:
    text = altered("    dr_replicas: 1\n    writer", "    dr_replicas: 1000\n    writer")
    assert plan_from_text(text, SOURCE).dr_gpus() == 8000


# --- DNS -------------------------------------------------------------------------------------

CNAME = (
    "record: {name: api.drills.test., type: A}\n  primary_value: 127.0.0.2\n  dr_value: 127.0.0.3"
)


@pytest.mark.parametrize(
    ("primary", "dr", "path"),
    [
        ("p.drills.test.", "api.drills.test.", "dns.dr_value"),
        ("p.drills.test.", "API.drills.test", "dns.dr_value"),
        ("api.drills.test.", "d.drills.test.", "dns.primary_value"),
    ],
)
def test_a_cname_to_itself_is_an_error(primary: str, dr: str, path: str) -> None:
    new = (
        f"record: {{name: api.drills.test., type: CNAME}}\n  primary_value: {primary}\n"
        f"  dr_value: {dr}"
    )
    found = only_problem(altered(CNAME, new))
    assert (found.path, found.message) == (
        path,
        "a CNAME cannot point at its own name: resolvers would loop",
    )


# --- objectives ------------------------------------------------------------------------------


@pytest.mark.parametrize("rto", ["1ms", "500ms", "10s", "29s", "0.4"])
def test_an_rto_below_any_feasible_takeover_is_an_error(rto: str) -> None:
    found = only_problem(altered("rto: 15m", f"rto: {rto}"))
    assert found.path == "objectives.rto"
    assert "is below any feasible takeover" in found.message


def test_an_rto_of_30s_is_accepted() -> None:
    assert plan_from_text(altered("rto: 15m", "rto: 30s"), SOURCE).objectives.rto == 30


@pytest.mark.parametrize("ttl", ["15m", "1h", "900"])
def test_a_ttl_not_shorter_than_the_rto_is_a_warning(ttl: str) -> None:
    text = altered("max_ttl: 60s", f"max_ttl: {ttl}")
    plan = plan_from_text(text, SOURCE)
    line, column = position(text, f"max_ttl: {ttl}")
    assert plan.warnings == (
        PlanWarning(
            "ttl-exceeds-rto",
            SOURCE,
            line,
            column + len("max_ttl: "),
            "dns.max_ttl",
            f"max_ttl {ttl if ttl != '900' else '15m'} is not shorter than the RTO 15m: "
            "clients may keep the fenced primary's address for longer than the whole objective",
        ),
    )


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("rpo: 5m", "rpo: 93d", "objectives.rpo"),
        ("rpo_target: 15m", "rpo_target: 100d", "datasets[0].rpo_target"),
    ],
)
def test_an_rpo_longer_than_the_drill_cadence_is_a_warning(old: str, new: str, path: str) -> None:
    assert warnings_of(altered(old, new)) == [(path, "rpo-exceeds-cadence")]


def test_the_valid_and_example_plans_have_no_warnings() -> None:
    assert plan_from_text(VALID, SOURCE).warnings == ()
    example = load_plan(Path(__file__).parents[2] / "plans" / "gpu-platform.example.yaml")
    assert plan_warnings(example) == ()


def test_warnings_of_a_plan_built_without_a_file_have_paths_but_no_lines() -> None:
    data = plan_from_text(altered("max_ttl: 60s", "max_ttl: 1h"), SOURCE).model_dump(mode="json")
    warning = DrillPlan.model_validate(data).warnings[0]
    assert (warning.path, warning.line, warning.column) == ("dns.max_ttl", None, None)


# --- schedules -------------------------------------------------------------------------------

SCHEDULE = '"0 3 1 1,4,7,10 *"'


@pytest.mark.parametrize(
    ("cron", "every"),
    [("* * * * *", "1m"), ("*/5 * * * *", "5m"), ("0,30 * * * *", "30m"), ("59 * * * *", None)],
)
def test_a_schedule_more_often_than_hourly_is_an_error(cron: str, every: str | None) -> None:
    text = altered(SCHEDULE, f'"{cron}"')
    if every is None:  # once an hour is the limit, and still a warning
        assert warnings_of(text) == [("schedule.cron", "schedule-too-frequent")]
        return
    found = only_problem(text)
    assert found.path == "schedule.cron"
    assert found.message.startswith(f"fires every {every}; each drill fences the primary")


@pytest.mark.parametrize(
    "cron",
    [
        "0 3 31 2 *",
        "0 3 30 2 *",
        "0 3 31 4,6,9,11 *",
        "0 0 31 feb *",
        "0 3 30-31 2 *",
        "0 3 31 2 0",  # Sundays in February too, by the rule; but Prefect's croniter gives up
    ],
)
def test_a_schedule_that_never_fires_is_an_error(cron: str) -> None:
    found = only_problem(altered(SCHEDULE, f'"{cron}"'))
    assert found.path == "schedule.cron"
    assert found.message.startswith("never fires")


@pytest.mark.parametrize(
    ("cron", "code"),
    [
        ("0 */6 * * *", "schedule-too-frequent"),
        ("@hourly", "schedule-too-frequent"),
        ("0 3 1 1 *", "schedule-too-rare"),
        ("@yearly", "schedule-too-rare"),
        ("0 3 29 2 *", "schedule-too-rare"),  # leap days only: every four years
        ("0 3 1 1,7 *", "schedule-too-rare"),
    ],
)
def test_unusual_cadences_are_warnings(cron: str, code: str) -> None:
    warnings = warnings_of(altered(SCHEDULE, f'"{cron}"'))
    assert ("schedule.cron", code) in warnings


@pytest.mark.parametrize("cron", ["0 3 1 1,4,7,10 *", "0 3 * * 1", "@weekly", "0 2 1 * *"])
def test_usual_cadences_have_no_warnings(cron: str) -> None:
    assert warnings_of(altered(SCHEDULE, f'"{cron}"')) == []


def test_a_leap_day_schedule_fires_every_four_years() -> None:
    fires = next_fire_times("0 0 29 2 *", dt.datetime(2025, 1, 1), 2)
    assert fires == [dt.datetime(2028, 2, 29)]  # the next is past the six-year horizon
    assert cadence("0 0 29 2 *", dt.date(2025, 1, 1)).longest is None


def test_cadence_is_exact() -> None:
    start = dt.date(2025, 1, 1)
    quarterly = cadence("0 3 1 1,4,7,10 *", start)
    assert quarterly.shortest == dt.timedelta(days=90) and quarterly.longest == dt.timedelta(
        days=92
    )
    twice = cadence("0 3,23 * * *", start)
    assert twice.shortest == dt.timedelta(hours=4) and twice.longest == dt.timedelta(hours=20)
    assert not cadence("0 3 31 2 *", start).fires


CRONS = [
    "0 3 1 1,4,7,10 *",
    "0 3 */2 * 1",
    "0 3 1 * */2",
    "0 3 1-31 * 1",
    "0 3 */1 * 1",
    "0 3 * * 1",
    "0 3 * * 0-6",
    "0 3 1 * 0-7",
    "0 3 15 * 7",
    "0 3 13 * fri",
    "30 4 * jan-mar mon-fri",
    "5/20 1-3 * * *",
    "0 0 29 2 1",
    "@weekly",
    "@monthly",
]


@pytest.mark.parametrize("cron", CRONS)
def test_fire_times_match_prefects_croniter(cron: str) -> None:
    from prefect._vendor.croniter import croniter

    start = dt.datetime(2025, 1, 1, 0, 0)
    reference = croniter(cron, start)  # day_or=True, as Prefect's CronSchedule uses it
    expected = [reference.get_next(dt.datetime) for _ in range(12)]
    assert next_fire_times(cron, start, 12) == expected


def test_random_crons_match_prefects_croniter() -> None:
    from prefect._vendor.croniter import CroniterBadDateError, croniter

    rng = random.Random(11)
    start = dt.datetime(2025, 3, 7, 13, 17)
    fields = [
        ["0", "15", "*/20", "5-10", "0,30"],
        ["3", "*/6", "1-5", "*", "0,12"],
        ["*", "1", "15", "*/3", "1-7", "29", "31", "1,15"],
        ["*", "2", "1,4,7,10", "*/2", "jan-jun"],
        ["*", "1", "0", "7", "mon-fri", "*/2", "1-5", "sat,sun"],
    ]
    for _ in range(150):
        cron = " ".join(rng.choice(choices) for choices in fields)
        try:
            expected = [croniter(cron, start).get_next(dt.datetime)]
        except CroniterBadDateError:
            expected = []  # never fires (day 31 of February): ours must agree
        assert next_fire_times(cron, start, 1) == expected, cron


# --- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1M", "did you mean 1m (minute)? months are not a duration unit"),
        ("15M", "did you mean 15m (minute)? months are not a duration unit"),
        ("1H", "units are lowercase: did you mean 1h?"),
        ("2D", "units are lowercase: did you mean 2d?"),
        ("5MS", "units are lowercase: did you mean 5ms?"),
        ("1h1h", "unit h appears twice; write each unit once, e.g. 1h30m"),
        ("1m30s1m", "units must go from the largest to the smallest, e.g. 1h30m"),
        ("30m1h", "units must go from the largest to the smallest, e.g. 1h30m"),
        ("1w", "weeks are not a duration unit; use days, e.g. 7d"),
        ("1y", "years are not a duration unit; use days, e.g. 365d"),
        ("3mo", "months are not a duration unit; use days, e.g. 30d"),
        ("15 minutes", "did you mean 15m (minutes)?"),
        ("2 hours", "did you mean 2h (hours)?"),
        ("1x", "not a duration unit after 1; use ms, s, m, h or d"),
        (
            "1e3",
            "not a duration; use seconds or a number with a unit, such as 45s, 15m, 1h30m or 2d",
        ),
    ],
)
def test_ambiguous_durations_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("1h30m", 5400),
        (" 15m ", 900),  # spaces around it are the YAML's
        ("2d", 172800),
        ("1m5ms", 60.005),
        ("1.5h", 5400),
    ],
)
def test_durations_in_the_strict_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("15 m", "no spaces inside a duration: did you mean 15m?"),
        ("1h 30m", "no spaces inside a duration: did you mean 1h30m?"),
        ("1 h30m", "no spaces inside a duration: did you mean 1h30m?"),
        ("15\tm", "no spaces inside a duration: did you mean 15m?"),
        ("1.5 s", "no spaces inside a duration: did you mean 1.5s?"),
        ("1 5m", "not a duration; use seconds or a number with a unit, such as 45s, 15m, "
         "1h30m or 2d"),
        ("\u0661\u0665m", "not a duration; use seconds or a number with a unit, such as 45s, "
         "15m, 1h30m or 2d"),  # Arabic-Indic digits, which a regex's \d reads as 15
        ("\uff11\uff15", "not a duration; use seconds or a number with a unit, such as 45s, "
         "15m, 1h30m or 2d"),  # fullwidth digits
    ],
)  # fmt: skip
def test_a_duration_is_written_in_one_piece_of_ascii(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize("value", ['"15 m"', '"1h 30m"', '"5 m"'])
def test_a_spaced_duration_in_a_plan_is_refused_and_located(value: str) -> None:
    text = altered("rto: 15m", f"rto: {value}")
    found = only_problem(text)
    assert found.path == "objectives.rto"
    assert found.message.startswith("no spaces inside a duration: did you mean ")


@pytest.mark.parametrize(
    ("zone", "hint"),
    [
        ("localtime", ""),  # this machine's setting, not a zone: another machine runs it
        ("posixrules", ""),
        ("Factory", ""),
        ("utc", "did you mean UTC? "),
        ("europe/berlin", "did you mean Europe/Berlin? "),
        ("/usr/share/zoneinfo/UTC", ""),
        ("../zoneinfo/UTC", ""),
        ("Europe/../UTC", ""),
        ("posix/UTC", ""),
        ("right/UTC", ""),
        ("zone.tab", ""),
        ("tzdata.zi", ""),
        ("Mars/Olympus", ""),
        ("", ""),
    ],
)
def test_only_iana_zone_names_are_time_zones(zone: str, hint: str) -> None:
    found = only_problem(altered("timezone: UTC", f'timezone: "{zone}"'))
    assert found.path == "schedule.timezone"
    assert found.message == (
        f"unknown time zone {zone!r}; {hint}use an IANA name such as UTC or Europe/Berlin"
    )


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires"])
def test_iana_zone_names_are_accepted(zone: str) -> None:
    plan = plan_from_text(altered("timezone: UTC", f"timezone: {zone}"), SOURCE)
    assert plan.schedule is not None and plan.schedule.timezone == zone


def test_a_month_typo_in_a_plan_is_located() -> None:
    text = altered("rpo: 5m", "rpo: 5M")
    found = only_problem(text)
    assert (found.path, found.message) == (
        "objectives.rpo",
        "did you mean 5m (minute)? months are not a duration unit",
    )
    assert (found.line, found.column) == position(text, "5M")


# --- the same thing twice --------------------------------------------------------------------

DR_OBJECTS = (
    "      endpoint_url: http://127.0.0.1:5000\n      region: us-east-1\n    ingress:\n"
    "      mode: controller"
)


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:5000/",
        "HTTP://127.0.0.1:5000",
        "http://127.0.0.1:5000//",
    ],
)
def test_the_same_s3_endpoint_written_differently_is_one_storage(endpoint: str) -> None:
    text = altered(DR_OBJECTS, DR_OBJECTS.replace("http://127.0.0.1:5000", endpoint))
    text = text.replace("dr_bucket: ckpt-dr", "dr_bucket: ckpt-primary")
    found = only_problem(text)
    assert found.path == "datasets[0].dr_bucket"
    assert "the same bucket" in found.message


@pytest.mark.parametrize(
    ("primary", "dr"),
    [
        ("https://S3.Example.com", "https://s3.example.com:443/"),
        ("http://minio.example.com:80", "http://MINIO.example.com."),
        ("https://s3.us-east-1.amazonaws.com", "https://s3.us-west-2.amazonaws.com"),
        ("http://[::1]:9000", "http://[0:0::1]:9000/"),
    ],
)
def test_endpoint_normalisation_for_buckets(primary: str, dr: str) -> None:
    text = VALID.replace("endpoint_url: http://127.0.0.1:5000", f"endpoint_url: {primary}", 1)
    text = text.replace("endpoint_url: http://127.0.0.1:5000", f"endpoint_url: {dr}", 1)
    text = text.replace("dr_bucket: ckpt-dr", "dr_bucket: ckpt-primary")
    assert [p.path for p in problems_of(text)] == ["datasets[0].dr_bucket"]


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost.",
        "LOCALHOST",
        "s3.localhost",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ],
)
def test_the_primarys_bucket_behind_another_spelling_of_its_host_is_refused(host: str) -> None:
    """The primary's S3 endpoint is http://127.0.0.1:5000: every one of these is it."""
    text = altered(DR_OBJECTS, DR_OBJECTS.replace("127.0.0.1:5000", f"{host}:5000"))
    text = text.replace("dr_bucket: ckpt-dr", "dr_bucket: ckpt-primary")
    found = only_problem(text)
    assert found.path == "datasets[0].dr_bucket"
    assert "the same bucket" in found.message


@pytest.mark.parametrize(
    "where", ["127.0.0.2:5000", "localhost:5001", "[::2]:5000", "example.com:5000"]
)
def test_another_host_or_port_is_another_storage(where: str) -> None:
    text = altered(DR_OBJECTS, DR_OBJECTS.replace("127.0.0.1:5000", where))
    text = text.replace("dr_bucket: ckpt-dr", "dr_bucket: ckpt-primary")
    assert plan_from_text(text, SOURCE).datasets[0].dr_bucket == "ckpt-primary"


def test_same_bucket_name_on_separate_storage_is_fine() -> None:
    text = altered(DR_OBJECTS, DR_OBJECTS.replace("127.0.0.1:5000", "127.0.0.4:5000"))
    text = text.replace("dr_bucket: ckpt-dr", "dr_bucket: ckpt-primary")
    plan_from_text(text, SOURCE)


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.2:18080/healthz?site=dr",
        "http://127.0.0.2:18080/other",
        "HTTP://127.0.0.2:18080",
    ],
)
def test_a_dr_endpoint_on_the_primarys_host_and_port_is_an_error(endpoint: str) -> None:
    found = only_problem(
        altered("endpoint: http://127.0.0.3:18080/healthz", f"endpoint: {endpoint}")
    )
    assert found.path == "sites.dr.endpoint"
    assert "same scheme, host and port" in found.message


def test_default_ports_make_endpoints_equal() -> None:
    text = VALID.replace("endpoint: http://127.0.0.2:18080/healthz", "endpoint: http://a.test/x")
    text = text.replace("endpoint: http://127.0.0.3:18080/healthz", "endpoint: http://A.test:80/y")
    assert [p.path for p in problems_of(text)] == ["sites.dr.endpoint"]


def _kubeconfigs(primary: str, dr: str, dr_context: str) -> str:
    text = VALID.replace("kubeconfig: primary.kubeconfig", f"kubeconfig: {primary}")
    return text.replace(
        "kubeconfig: dr.kubeconfig\n      context: dr",
        f"kubeconfig: {dr}\n      context: {dr_context}",
    )


def test_one_kubeconfig_through_a_symlink_with_one_context_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "real.kubeconfig").write_text("{}", encoding="utf-8")
    (tmp_path / "link.kubeconfig").symlink_to(tmp_path / "real.kubeconfig")
    plan = tmp_path / "plan.yaml"
    plan.write_text(_kubeconfigs("real.kubeconfig", "link.kubeconfig", "primary"))
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    assert [(p.path, p.message) for p in info.value.problems] == [
        (
            "sites.dr.kubernetes.kubeconfig",
            "is the same file as the primary's kubeconfig, with the same context: "
            "both sites would be the one cluster",
        )
    ]
    # Another context in the one file is another cluster; another file may be too.
    plan.write_text(_kubeconfigs("real.kubeconfig", "link.kubeconfig", "dr"))
    load_plan(plan)
    plan.write_text(_kubeconfigs("real.kubeconfig", "other.kubeconfig", "primary"))
    load_plan(plan)


# --- unknown keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["password", "api_key", "secret", "token", "client_secret"])
def test_a_credential_named_unknown_key_says_credentials_go_by_reference(key: str) -> None:
    text = altered("    dr_replicas: 2\n", f"    dr_replicas: 2\n    {key}: env:X\n")
    found = only_problem(text)
    assert found.message == f"unknown field `{key}` here; {CREDENTIAL_KEY_HINT}"
    assert f"did you mean `{key}`" not in found.message


@pytest.mark.parametrize(
    ("where", "key", "suggested"),
    [
        ("    dr_replicas: 2\n", "dr_replicaz", "dr_replicas"),
        ("    dr_replicas: 2\n", "DR_Replicas", "dr_replicas"),
        ("    dr_replicas: 2\n", "namespce", "namespace"),
        ("  max_ttl: 60s\n", "primary_valu", "primary_value"),
        ("      context: dr\n", "kubeconfg", "kubeconfig"),
    ],
)
def test_suggestions_come_from_the_keys_allowed_there(where: str, key: str, suggested: str) -> None:
    found = only_problem(
        altered(where, f"{where}{where[: len(where) - len(where.lstrip())]}{key}: 1\n")
    )
    assert found.message == f"unknown field `{key}`; did you mean `{suggested}`?"


def test_no_suggestion_of_a_key_from_elsewhere() -> None:
    found = only_problem(altered("  max_ttl: 60s\n", "  max_ttl: 60s\n  dr_replicas: 1\n"))
    assert found.message == "unknown field `dr_replicas`"


def test_fields_at_follows_unions_and_lists() -> None:
    assert "password" in fields_at(DrillPlan, ("sites", "dr", "registry", "oci", "auth"))
    assert fields_at(DrillPlan, ("workloads", 3)) >= {"dr_replicas", "gpu", "tier"}
    assert "servers" in fields_at(DrillPlan, ("dns", "rfc2136"))
    assert fields_at(DrillPlan, ("nowhere", "at all")) == set()


# --- the CLI prints warnings ------------------------------------------------------------------


def test_validate_prints_warnings_and_strict_fails_on_them(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    text = altered("max_ttl: 60s", "max_ttl: 1h")
    path.write_text(text, encoding="utf-8")
    line, column = position(text, "1h\n")
    result = runner.invoke(app, ["plan", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"! {path}:{line}:{column}: dns.max_ttl: warning: max_ttl 1h is not shorter than the "
        "RTO 15m: clients may keep the fenced primary's address for longer than the whole objective"
    ]
    strict = runner.invoke(app, ["plan", "validate", str(path), "--strict"])
    assert strict.exit_code == 2
    assert "warnings are problems with --strict" in strict.stderr
