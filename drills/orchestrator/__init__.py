"""A local Prefect server and worker, and the few Prefect REST calls drills makes."""
