"""The one way the front ends start runs: the CLI, the dashboard and the flows all come here.

request builds a run's ``DrillRequest`` from its inputs and picks what runs it (a drill, a
practice or a failback); deployments declares an incident, asks for a failback, starts a
deployment's flow run on the Prefect server and follows it to its end.
"""
