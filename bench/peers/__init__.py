"""The peers (procrastinate, pgqueuer, chancy, awa, oban), driven through their own APIs in
``bench/.peers-venv`` (oban, which needs Python 3.12+, in ``bench/.peers312-venv``).

Nothing here imports Kickside: these modules run in the peers' virtual environment, which the
harness creates and fills from PyPI (:mod:`bench.peers.runner`); the peers are never vendored.
"""
