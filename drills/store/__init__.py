"""The history store: runs, timelines, journals, readiness snapshots, audit log."""
