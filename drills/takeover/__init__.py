"""The takeover: a drill or an incident, its journal, crash recovery and leases."""
