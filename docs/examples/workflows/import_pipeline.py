"""A workflow: fetch, then parse, then thumbnails in parallel, then notify once all are final.

Each step is an ordinary job; a step waits (state ``waiting``) until the jobs it runs after are
final, and reads their results. ``drain_jobs`` stands in for a pool here.
"""

from __future__ import annotations

from typing import Any

from kickside_engine import (
    After,
    Job,
    JobState,
    WorkerRegistry,
    Workflow,
    connect_database,
    get_job,
    get_workflow,
    migrate,
    upstream_results,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()
db = connect_database()
migrate.upgrade(db)


@registry.worker("fetch")
def fetch(args: dict[str, Any], job: Job) -> dict[str, Any]:
    return {"pages": 3, "url": args["url"]}


@registry.worker("parse")
def parse(args: dict[str, Any], job: Job) -> dict[str, Any]:
    fetched = upstream_results(db, job)["fetch"].result  # the upstream's return value
    return {"pages": fetched["pages"]}


@registry.worker("thumbnail")
def thumbnail(args: dict[str, Any], job: Job) -> dict[str, Any]:
    return {"page": args["page"], "bytes": 1024 * (args["page"] + 1)}


@registry.worker("notify")
def notify(args: dict[str, Any], job: Job) -> str:
    thumbs = upstream_results(db, job)  # {"thumb[0]": Upstream(...), ...}
    made = [t.result["page"] for t in thumbs.values() if t.state is JobState.COMPLETED]
    return f"import {args['import']}: {len(made)} of {len(thumbs)} thumbnails"


wf = Workflow("import-42")
wf.add("fetch", fetch.new({"url": "https://example.com/catalogue.pdf"}))
wf.add("parse", parse.new({}), after=["fetch"])
wf.add_many("thumb", [thumbnail.new({"page": p}) for p in range(3)], after=["parse"])
# on_failure="run": notify runs even if a thumbnail is discarded (the default cancels it).
wf.add("notify", notify.new({"import": 42}), after=[After("thumb", on_failure="run")])
ids = wf.insert(db)  # one transaction (pass conn= to use yours)

print([s.state.value for s in get_workflow(db, "import-42").steps])
# ['available', 'waiting', 'waiting', 'waiting', 'waiting', 'waiting']
drain_jobs(db, registry)
view = get_workflow(db, "import-42")
print(view.state)  # completed
assert view.state == "completed"
notified = get_job(db, ids["notify"])
assert notified is not None
print(notified.result)  # import 42: 3 of 3 thumbnails
assert notified.result == "import 42: 3 of 3 thumbnails"
