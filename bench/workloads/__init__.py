"""The workloads, one module each; :mod:`bench.catalog` lists them for the runner.

Kept free of imports: executor processes import :mod:`bench.workloads.app` and should load
nothing else of the harness.
"""
