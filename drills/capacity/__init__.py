"""What the DR pool costs and whether it is the right size: prices, the pool's GPUs by use,
the idle ratio (DCGM in Prometheus, else allocation) and a sizing recommendation.

Nothing here mutates anything: `drills capacity` and the metrics read the DR cluster, a
pricing file and Prometheus, and compute.
"""
