"""enroll.py: enroll one slot per account, each with demand so that it runs once now."""

from billing import sync_account

from kickside_engine import connect_database

db = connect_database()  # KICKSIDE_DATABASE_URL (and KICKSIDE_SCHEMA) from the environment
accounts = {"acct-001": "bank-a", "acct-002": "bank-a", "acct-003": "bank-b"}

with db.begin() as conn:  # one transaction: every slot or none
    for account, bank in accounts.items():
        (
            sync_account.new({"account": account})
            .slot("billing", "sync", account, demand=True)  # (namespace, scope, key)
            .concurrency_key(bank)  # the per-key limit counts per bank
            .insert(db, conn=conn)
        )
print(f"enrolled {len(accounts)} slots")
