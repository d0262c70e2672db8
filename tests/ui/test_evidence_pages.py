"""Evidence on the dashboard: the run detail's pack, and coverage and findings on Plans."""

from __future__ import annotations

import re

import pandas as pd  # type: ignore[import-untyped]

from drills.evidence.keys import SIGNING_KEY_ENV, keygen, load_verifier
from drills.evidence.pack import verify
from drills.store.kinds import RunStatus
from tests.evidence.support import check, make_run, phase
from tests.support.services import require_system_binary
from tests.support.ui import Drilled, UiEnv, open_page, shown
from ui import data


def test_the_run_detail_offers_its_evidence_pack(populated: Drilled, ui_env: UiEnv) -> None:
    require_system_binary("chromium", "chromium")
    ui_env.set("DRILLS_UI_LAB", "1")  # an export: for the operator role
    at = open_page("history")
    at.query_params["run"] = populated.run_id
    at.run()
    assert [b for b in at.download_button if b.label == "Download evidence pack"]
    assert "Unsigned" in shown(at)
    # Signed once a key is configured; the pack the button builds verifies.
    private, public, keyid = keygen(ui_env.tmp_path / "keys")
    ui_env.set(SIGNING_KEY_ENV, f"file:{private}")
    at.run()
    assert f"Signed with key `{keyid[:16]}" in shown(at)
    pack = ui_env.tmp_path / "pack.zip"
    pack.write_bytes(data.exported_pack(ui_env.store(), populated.run_id, "anonymous (lab mode)"))
    result = verify(pack, load_verifier(public))
    assert result.files_ok and result.signature_ok, result.problems
    [export] = [e for e in data.declarations(ui_env.db_url) if e.action == "export-evidence"]
    assert (export.who, export.plan, export.accepted) == ("anonymous (lab mode)", "lab", True)
    assert export.outcome == f"exported the evidence pack of run {populated.run_id}"
    # A key that cannot be read: said, and no button.
    ui_env.set(SIGNING_KEY_ENV, "env:NO_SUCH_SIGNING_KEY_VAR")
    at.run()
    assert not [b for b in at.download_button if b.label == "Download evidence pack"]
    assert "NO_SUCH_SIGNING_KEY_VAR" in shown(at)


def _markdown_table(text: str) -> pd.DataFrame:
    """The rows of a Markdown table as the page wrote them (cells wrap, unlike a dataframe's)."""
    head, _, *rows = [line.strip("|").split(" | ") for line in text.splitlines()]
    cells = [[re.sub(r"\\(.)", r"\1", c.strip()) for c in r] for r in rows]  # escapes undone
    return pd.DataFrame(cells, columns=[h.strip() for h in head])


def test_plans_show_coverage_findings_and_the_history_verdict(
    populated: Drilled, ui_env: UiEnv
) -> None:
    store = ui_env.store()
    real = store.get_run(populated.run_id)
    assert real is not None
    # A step the real drill passed, failed by an older run: a finding the drill closed.
    smoke = next(p for p in real.timeline if p["name"] == "smoke")
    step = smoke["steps"][0]["name"]
    failed = [phase("smoke", (step, "failed", "HTTP 503"))]
    store.create_run(
        make_run("old-failure", plan="lab", days=-3000, status=RunStatus.ROLLED_BACK,
                 phases=failed, checks=[check("dns-ttl", "fail", "lower the TTL")])
    )  # fmt: skip
    at = open_page("plans")
    text = shown(at)
    assert "**1 of 1 plans drilled in the last 12 months.**" in text
    assert "History verifies" not in text  # the chain reads every record: asked for
    assert "drilled in the last 12 months" in text and "failback drilled" in text
    # The real drill passed the smoke step: that finding is closed; so is the cadence, which
    # the succeeded drill answers by itself; dns-ttl, never checked again, is open.
    (expander,) = [x for x in at.expander if x.label.startswith("Open findings")]
    table = _markdown_table(next(m.value for m in expander.markdown if "| finding |" in m.value))
    assert "remediation" in table.columns and "old-failure" in set(table["since run"])
    assert expander.label == f"Open findings ({len(table)})"
    assert f"smoke / {step}" not in set(table["what"])
    assert "dns-ttl" in set(table["what"]) and "drill.cadence" not in set(table["what"])
    # The coverage's count (one statement over the history) is the fold's, exactly.
    assert f"; {len(table)} open finding(s);" in text
    at.toggle(key="plans.verify").set_value(True).run()
    assert "History verifies" in shown(at)


def test_no_pack_button_when_chromium_cannot_run(populated: Drilled, ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_CHROMIUM", str(ui_env.tmp_path / "no-such-chromium"))
    ui_env.set("DRILLS_UI_LAB", "1")
    at = open_page("history")
    at.query_params["run"] = populated.run_id
    at.run()
    assert not [b for b in at.download_button if b.label == "Download evidence pack"]
    assert "no-such-chromium" in shown(at)
