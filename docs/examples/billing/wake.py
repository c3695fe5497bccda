"""wake.py: new work arrived for two accounts: give their slots demand, in the same
transaction as the work itself, then tell the pools."""

from kickside_engine import WakeKey, connect_database, nudge_workers, wake_multi

db = connect_database()
with db.begin() as conn:
    # ... write the new work for these accounts with `conn` ...
    result = wake_multi(
        db,
        [WakeKey("billing", "sync", "acct-001"), WakeKey("billing", "sync", "acct-003")],
        conn=conn,
    )
nudge_workers(db)  # after the commit, never before it
print(f"woke {len(result.woken)} slots; unknown keys: {result.missing}")
