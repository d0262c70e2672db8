"""The readiness checks themselves, one module per area of the plan they judge (images,
data, secrets, cluster, DNS, ...), with what they compute with beside them.

The catalog imports every module of this package: a check is found by being here, and
nothing else belongs here. The machinery that runs the checks (``drills.checks.base``,
``runner``, ``checkup``, ``readiness``, ``view``) lives one level up and never imports a
check module (a contract in ``.importlinter`` says so).
"""
