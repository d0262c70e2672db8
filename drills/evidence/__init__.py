"""Signed evidence packs: a drill's report and records, hashed, in a DSSE-signed in-toto
Statement, for an auditor to verify with no database and no network; the findings a run
leaves open; and the coverage of every plan over a period."""
