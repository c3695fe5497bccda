"""billing.py: one slot per customer account, in a capacity group that limits how many
accounts sync at once (in all, and per bank)."""

from __future__ import annotations

from typing import Any

from kickside_engine import CapacityDeclaration, Done, Job, WorkerRegistry

registry = WorkerRegistry()

#: Limits are read from kickside_setting rows under the namespace "billing" at every claim.
BANK_SYNC = CapacityDeclaration(group="bank-sync", settings_namespace="billing")


@registry.worker("sync_account", queue="billing", capacity=BANK_SYNC)
def sync_account(args: dict[str, Any], job: Job) -> Done:
    print(f"syncing {job.identity_key} through {job.concurrency_key}")
    # Everything up to now is synced: demand that arrived during this run is covered too.
    return Done(demand_satisfied=True)
