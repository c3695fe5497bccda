"""Kickside's benchmark harness: one command, ``python -m bench.run``, reproduces every figure.

The harness is not part of the product: it may hold statements the engine never runs (fast
history generation, a COPY what-if), and it never runs in CI except ``--quick`` as a smoke test.
"""
