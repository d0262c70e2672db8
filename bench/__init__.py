"""Benchmarks: each module here has a ``main()`` that runs ours beside a peer and prints both."""
