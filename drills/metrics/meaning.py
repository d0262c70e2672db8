"""What each metric means, for the reference page (docs/reference/metrics.md): the longer
text beside the one-line HELP that Prometheus shows. Markdown; one entry a metric of SPECS,
which the reference test checks."""

from __future__ import annotations

MEANING: dict[str, str] = {
    "drills_readiness_check_status": (
        "1 for each check of the plan's latest readiness run, one series a check: "
        '`status` is its status (`pass`, `warn`, `fail`, `error`), `blocking="true"` when '
        "the result blocks a takeover. A check whose status changes moves to a new series "
        "(the old one goes stale at once), so select on the labels: "
        '`drills_readiness_check_status{status="fail"}`'
    ),
    "drills_readiness_blocking_checks": ("how many checks block a takeover in that run"),
    "drills_readiness_last_run_timestamp_seconds": (
        "when that run checked; its age is `time() - drills_readiness_last_run_timestamp_seconds`"
    ),
    "drills_readiness_interval_seconds": ("the readiness schedule (`--readiness-interval`)"),
    "drills_dataset_replication_lag_seconds": (
        "replication lag as the latest readiness run's `data.rpo` check measured it "
        "(absent when it could not)"
    ),
    "drills_dataset_rpo_target_seconds": ("the dataset's `rpo_target` in the plan"),
    "drills_drill_last_success_timestamp_seconds": (
        "when the last drill that counts for the cadence ended (mode drill, succeeded, "
        "not a dry run: as the `drill.cadence` check counts)"
    ),
    "drills_drill_cadence_seconds": ("the longest a plan may go without such a drill (92 days)"),
    "drills_drill_due_in_seconds": (
        "time left until that limit; negative when overdue (÷ 86400 for days)"
    ),
    "drills_run_last_finished_timestamp_seconds": (
        "when the last run of that mode with an RTO measured (not a dry run) finished"
    ),
    "drills_run_last_rto_seconds": ("that run's RTO"),
    "drills_run_last_client_rto_seconds": (
        "that run's client-visible RTO (through DNS, with the old TTL)"
    ),
    "drills_run_last_full_capacity_seconds": (
        "when that run's normal tier was ready too (full capacity), seconds after T0; "
        "absent for runs recorded before it was measured"
    ),
    "drills_run_last_preemption_seconds": (
        "from that run's first scale-up at DR to the last GPU freed for the critical tier by "
        "preempting DR's low-priority work; 0 when nothing was preempted, absent for runs "
        "recorded before it was measured"
    ),
    "drills_run_last_rpo_seconds": ("that run's RPO for each dataset"),
    "drills_run_last_slo_ok": (
        "each SLO of the plan (`slo` in the plan) as the newest finished drill or incident "
        "recorded it, whatever its verdict: 1 when it was OK within the RTO target and stayed "
        "OK for its hold, else 0, with `status` (`held`, `breached`, `unverified`, `stopped`). "
        'Alert on `drills_run_last_slo_ok{mode="drill"} == 0`'
    ),
    "drills_run_last_slo_value": (
        "the last value of the SLO's expression that run read from Prometheus (absent when "
        "it read none)"
    ),
    "drills_dr_carry_ratio": (
        "the share of the primary's demand at T0 that DR's ready replicas carried when that run "
        "stopped waiting for them (ready × per_replica × (1 − reserve) ÷ demand; the least of "
        "the plan's measured services). Below target_percent ÷ 100, the run's verdict is "
        "`missed`. Absent for runs of plans without `demand`, or whose demand was not known"
    ),
    "drills_run_last_detection_seconds": (
        "an incident's `detection_seconds`: its declaration (T0) minus `detected_at`, the "
        "`startsAt` of the alert whose proposal an operator approved, or `--detected-at` given "
        "by hand. With the RTO (T0 to service restored) it is the whole outage as users saw "
        "it: `drills_run_last_detection_seconds + drills_run_last_rto_seconds`. Absent when "
        "that run's detection is not known. `drills history --json` and the report give the "
        "same figure as `detection_seconds`, with `detected_at` and the `detection_chain` "
        "(detection, declaration, fence, service restored, DR carrying)"
    ),
    "drills_plan_rto_target_seconds": ("the plan's `objectives.rto`"),
    "drills_plan_rpo_target_seconds": ("the plan's `objectives.rpo`"),
    "drills_plan_serving_site": (
        "1 for the site serving the plan (`primary`, `dr` or `in-transition`), 0 for the others"
    ),
    "drills_runs_in_progress": ("runs not finished whose process holds the plan's lease"),
    "drills_runs_stuck": (
        "runs not finished that no process holds the lease of: the process died, `drills "
        "recover` finishes the job"
    ),
    "drills_run_oldest_unfinished_start_timestamp_seconds": (
        "when the oldest unfinished run of the plan started (absent when none)"
    ),
    "drills_evidence_chain_length": (
        "links in the plan's evidence chain (its head's position); it only grows, so a "
        "drop means links were removed: `drills evidence verify --db URL --checkpoints "
        "PLACE` says which"
    ),
    "drills_incident_proposals_pending": (
        "incidents an alert matching the plan's `declare_on` proposed that nobody has approved, "
        "dismissed, nor seen withdrawn (its alerts resolved): each waits on the Incident page. "
        "`drills_incident_proposals_pending > 0` for long means nobody is looking"
    ),
    "drills_dr_standby_cost_per_hour": (
        "what the GPUs reserved at DR for the plan's standbys cost an hour, at the prices of "
        "its pricing file (`cost.pricing` or `DRILLS_PRICING`), in `currency`; × 730 for a "
        "month. Absent when a reserved GPU is on a node the file does not price. Only for "
        "plans with a `cost` section, refreshed every 5 minutes in the background"
    ),
    "drills_dr_gpu_idle_ratio": (
        "the part of DR's GPUs idle: 1 − mean `DCGM_FI_DEV_GPU_UTIL` over 7 days "
        '(`source="prometheus"`), or the GPUs no pod holds now (`source="allocation"`) when '
        "Prometheus is not given or does not answer"
    ),
    "drills_dr_gpus_needed": (
        'GPUs a takeover needs at DR: `need="minimum"` is gpu × dr_replicas over the critical '
        'and normal tiers; `need="target"` the plan\'s `cost.demand` at its `target_percent` '
        "(absent without a demand)"
    ),
    "drills_dr_gpus_reserved": (
        "GPUs at DR that neither the sentinel, nor low-priority work, nor other work holds: "
        "what is kept for the plan's takeover. Compare with `drills_dr_gpus_needed` to see "
        "what preemptible work could use"
    ),
    "drills_plan_files_invalid": (
        "plan files configured that do not load (`drills plan validate` says why)"
    ),
    "drills_metrics_scrape_duration_seconds": ("the time this scrape took to compute"),
}
