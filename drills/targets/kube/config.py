"""One site's Kubernetes client configuration, from its kubeconfig or in-cluster account.

Each site gets its own ``Configuration`` (CA included); the process-wide default the
``kubernetes`` package keeps is never touched.
"""

from __future__ import annotations

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from drills.errors import PermanentError
from drills.plan import DrillPlan, KubernetesAccess
from drills.plan.kubeconfig import load_kubeconfig

POOL_SIZE = 32


def site_configuration(
    role: str, access: KubernetesAccess, plan: DrillPlan
) -> client.Configuration:
    """A fresh client configuration for one site; never the process-wide default."""
    cfg = client.Configuration()
    where = "in-cluster service account"
    try:
        if access.in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            assert access.kubeconfig is not None  # the plan model guarantees one of the two
            path = plan.resolve_path(access.kubeconfig)
            where = str(path)
            # The plan layer's check first: the client itself walks a malformed file
            # into a TypeError, and blocks on a FIFO.
            load_kubeconfig(path, access.context)
            config.load_kube_config(
                config_file=str(path),
                context=access.context,
                client_configuration=cfg,
                persist_config=False,  # never write token refreshes back into the file
            )
    except (ConfigException, OSError, ValueError) as exc:
        # The loader's messages name files, contexts and keys, never the credentials.
        cause = f"cannot load the Kubernetes configuration ({type(exc).__name__}: {exc})"
        raise PermanentError(f"kubernetes {role} ({where})", cause) from exc
    cfg.retries = False  # one attempt per call: the caller owns retry policy and deadlines
    # Concurrent checks share this client; a pool smaller than their requests would
    # open and discard connections (and log a warning) on every burst.
    cfg.connection_pool_maxsize = POOL_SIZE
    return cfg
