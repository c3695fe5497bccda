"""enqueue.py: put a job in the database; any process with access to it may do this."""

from tasks import send_welcome

from kickside_engine import connect_database, migrate

db = connect_database()  # KICKSIDE_DATABASE_URL, else the embedded SQLite file
migrate.upgrade(db)  # create or upgrade Kickside's tables (a no-op when current)

inserted = send_welcome.new({"user_id": 42}).insert(db)
print(f"enqueued job {inserted.id}")
