"""The forecast model on runs written out by hand: what each rule of the model does."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from drills.cli import forecast_cmd
from drills.forecast import CurrentState, RunSample, forecast
from drills.forecast.model import forecast_error
from drills.plan import DrillPlan, plan_from_text
from tests.support.drill import offline_lab_plan_text

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def _plan() -> DrillPlan:
    return plan_from_text(offline_lab_plan_text())


def _sample(rto: float, *, days_ago: int = 1, llm: float = 10.0) -> RunSample:
    return RunSample(
        run_id=f"r{rto}",
        started_at=NOW - dt.timedelta(days=days_ago),
        rto_s=rto,
        phases={"fence": 2.0, "bring-up": rto - 5.0, "dns": 2.0, "smoke": 1.0},
        workloads={
            "serving/llm-server": ("critical", llm),
            "serving/inference-gateway": ("critical", 3.0),
            "training/trainer": ("normal", 4.0),
        },
        dns_done_s=rto - 1.0,
        full_capacity_s=rto - 3.0,
    )


def test_without_history_the_model_is_stated_and_uses_the_sentinel_speed() -> None:
    slow = forecast(_plan(), [], CurrentState(pod_start_s=20.0))
    fast = forecast(_plan(), [], CurrentState(pod_start_s=1.0))
    assert slow.drills == 0 and "stated model, not history" in slow.basis
    assert slow.rto.low <= slow.rto.point <= slow.rto.high
    assert slow.rto.point > fast.rto.point


@pytest.mark.parametrize(("read_s", "fastest_s"), [(1.0, 0.0), (3.0, 2.0)])
def test_the_sentinels_pod_start_is_read_to_the_second(read_s: float, fastest_s: float) -> None:
    """Kubernetes stamps whole seconds: a 0.2 s start across a second's edge reads as 1 s,
    and a first drill on such sites takes less than that (0.79 s on the lab)."""
    stated = forecast(_plan(), [], CurrentState(pod_start_s=read_s))
    assert stated.rto.low == fastest_s  # the fence, DNS and smoke phases can take no time
    assert stated.rto.high == 20 + 20 + 10 + ((read_s + 1) * 4 + 10)
    assert f"({read_s:.0f} s, ±1 s)" in stated.basis


def test_history_interval_holds_the_runs_and_leans_to_the_newest() -> None:
    samples = [_sample(30.0, days_ago=1), _sample(20.0, days_ago=5), _sample(20.0, days_ago=9)]
    f = forecast(_plan(), samples, CurrentState(dns_ttl_s=60.0))
    assert f.rto.low < 20.0 and f.rto.high > 30.0
    assert f.rto.point > 25.0  # the newest run weighs most
    assert f.basis.startswith("3 drills; the last 9 days")
    assert (f.dominant_phase, f.dominant_workload) == ("bring-up", "serving/llm-server")
    assert f.client_rto.point >= f.rto.point + 50  # DNS switched, clients wait out the TTL


def test_a_warm_workload_drops_out_of_its_tier() -> None:
    cold = forecast(_plan(), [_sample(30.0)], CurrentState())
    warm = forecast(_plan(), [_sample(30.0)], CurrentState(warm=frozenset({"serving/llm-server"})))
    assert cold.rto.point - warm.rto.point == 7.0  # llm 10 s → gateway 3 s leads the tier
    assert warm.dominant_workload == "training/trainer"


def test_above_target_warns_and_only_a_certain_miss_blocks() -> None:
    plan = _plan()
    target = plan.objectives.rto
    near = forecast(plan, [_sample(target * 0.9), _sample(target * 1.2)], CurrentState())
    assert near.rto.high > target and not near.certainly_above
    far = forecast(plan, [_sample(target * 3)], CurrentState())
    assert far.above_target and far.certainly_above


def test_blocked_capacity_means_no_completion_and_errors_are_signed() -> None:
    f = forecast(_plan(), [_sample(30.0)], CurrentState(blocked_by=("Kueue quota short",)))
    assert not f.completes and f.to_json()["blocked_by"] == ["Kueue quota short"]
    assert forecast_error({"rto_seconds": 10.0, "interval": [5.0, 15.0]}, 12.5) == {
        "error_seconds": 2.5, "inside_interval": True,
    }  # fmt: skip
    assert forecast_error(None, 3.0) is None


def test_a_state_that_could_not_be_read_makes_the_forecast_unverified(
    capsys: pytest.CaptureFixture[str],
) -> None:
    read = forecast(_plan(), [], CurrentState())
    unread = forecast(_plan(), [], CurrentState(unreadable=("warm (kubernetes dr: refused)",)))
    assert read.verified and read.to_json()["verified"] is True
    assert not unread.verified
    assert unread.to_json()["unreadable"] == ["warm (kubernetes dr: refused)"]
    forecast_cmd.print_forecast(unread)
    assert "UNVERIFIED: could not read the sites now" in capsys.readouterr().out


def test_without_history_the_dns_phase_includes_external_dnss_sync_interval() -> None:
    direct = forecast(_plan(), [], CurrentState(pod_start_s=1.0))
    data = yaml.safe_load(offline_lab_plan_text())
    data["dns"] = {
        "provider": "external-dns", "site": "dr", "owner_id": "dr-cluster", "sync_interval": "1m",
        "resource": {"namespace": "external-dns", "name": "api"},
        **{k: data["dns"][k] for k in ("servers", "zone", "record", "primary_value", "dr_value")},
    }  # fmt: skip
    through = forecast(plan_from_text(yaml.safe_dump(data)), [], CurrentState(pod_start_s=1.0))
    assert through.phases["dns"] == direct.phases["dns"] + 30.0
    assert through.rto.high == direct.rto.high + 60.0
    assert "DNS 0-80 s" in through.basis and "DNS 0-20 s" in direct.basis


@pytest.mark.parametrize(("field", "key"), [("preemption_s", "preemption"), ("carry_s", "carry")])
def test_a_phase_inside_the_takeover_is_forecast_from_the_drills_that_measured_it(
    field: str, key: str
) -> None:
    """preemption_seconds (GPUs taken back at DR) and carry_seconds (until DR carried the
    demand's target): each from the runs that measured it, the others not counted."""
    from dataclasses import replace

    measured = [replace(_sample(30.0, days_ago=1), **{field: 4.0}),
                replace(_sample(20.0, days_ago=5), **{field: 2.0}),
                _sample(25.0, days_ago=7)]  # fmt: skip
    f = forecast(_plan(), measured, CurrentState()).to_json()
    # Weighted 2:1 toward the newer of the two runs that measured it.
    assert f[f"{key}_seconds"] == pytest.approx(4.0 * 2 / 3 + 2.0 / 3, abs=0.05)
    low, high = f[f"{key}_interval"]
    assert low < 2.0 and high > 4.0
    none = forecast(_plan(), [_sample(30.0)], CurrentState()).to_json()
    assert none[f"{key}_seconds"] is None and none[f"{key}_interval"] is None
