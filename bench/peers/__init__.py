"""The peers (procrastinate, pgqueuer), driven through their own APIs in ``bench/.peers-venv``.

Nothing here imports Kickside: these modules run in the peers' virtual environment, which the
harness creates and fills from PyPI (:mod:`bench.peers.runner`); the peers are never vendored.
"""
