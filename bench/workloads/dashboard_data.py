"""A million jobs of history for the dashboard workload, generated inside PostgreSQL.

One ``INSERT ... SELECT generate_series`` per table, seeded so every run builds the same data:
jobs spread over the last seven days with time-ordered ids like the engine's UUIDv7. Older jobs
are final (mostly completed; some discarded with errors, some cancelled) or parked and disabled
slots; the newest 5 % hold the live work: an available backlog, scheduled and retryable jobs
with errors, the 200 newest executing under leases, and a capacity group. Six queues, three
workers each, tags, args with e-mail addresses and hex notes, and one run row per attempt. Two
live nodes, paused and running queues, capacity settings and an audit trail complete it. Then
``VACUUM ANALYZE``, as autovacuum would have done for a table that grew like this. This SQL
belongs to the harness, never to the product.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import text

from bench.targets import reset
from kickside_engine import Database
from kickside_engine.store.nodes import NodeBeat, heartbeat

HISTORY_SPAN = timedelta(days=7)
#: The newest jobs are executing under leases (fewer on a small history: one in fifty).
EXECUTING = 200
QUEUES = ("default", "mailers", "webhooks", "exports", "reports", "billing")
NODES = (
    ("web-1:4242:a1b2", {"default": 10, "mailers": 5, "webhooks": 5, "exports": 2}),
    ("web-2:4243:c3d4", {"default": 10, "mailers": 5, "billing": 2}),
)
CAPACITY_META = {
    "capacity": {
        "group": "exports",
        "settings_namespace": "app.capacity",
        "global_limit_key": "global_limit",
        "concurrency_key_limit_key": "concurrency_key_limit",
    }
}

# s.g: 1..n, oldest first; s.t: its insert time; s.r and s.u: uniform draws for state and queue.
_JOBS_SQL = """
INSERT INTO {job} (
    id, kind, state, queue, worker, args, meta, tags, errors, attempt, max_attempts, priority,
    namespace, scope, identity_key, concurrency_key, capacity_group,
    demand_pending, control_pending, demand_seq, lease_owner, lease_token, lease_expires_at,
    rescue_count, max_execution_ms, inserted_at, scheduled_at, attempted_at, completed_at,
    cancelled_at, discarded_at, finalized_at, updated_at
)
SELECT
    (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0')
        || substr(md5(g::text), 1, 20))::uuid,
    CASE WHEN state IN ('parked', 'disabled') THEN 'slot' ELSE 'oneshot' END,
    state, queue, 'app.' || queue || '.' || (ARRAY['send', 'sync', 'build'])[1 + g % 3],
    jsonb_build_object('user_id', g % 50000, 'email', 'user' || (g % 50000) || '@example.com',
                       'order', g, 'note', md5(g::text)),
    CASE WHEN capacity THEN CAST(:capacity_meta AS jsonb) ELSE '{{}}'::jsonb END,
    jsonb_build_array('tenant:' || (g % 500), queue),
    CASE WHEN failed THEN jsonb_build_array(jsonb_build_object(
        'attempt', 1, 'at', to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
        'error', (ARRAY['RuntimeError: upstream 503 from api-', 'TimeoutError: read timed out on ',
                        'SMTPError: 451 try later at mx-', 'KeyError: account '])[1 + g % 4]
                 || (g % 997) || CASE WHEN g % 4 = 0 THEN '' ELSE '.example.com' END))
        ELSE '[]'::jsonb END,
    CASE WHEN state IN ('scheduled', 'available') THEN 0 WHEN failed THEN 2 ELSE 1 END,
    20, CASE WHEN g % 10 = 0 THEN 5 ELSE 0 END,
    CASE WHEN state IN ('parked', 'disabled') THEN 'tenants' END,
    CASE WHEN state IN ('parked', 'disabled') THEN 'sync' END,
    CASE WHEN state IN ('parked', 'disabled') THEN 'tenant-' || g END,
    CASE WHEN capacity THEN 'tenant-' || (g % 7) END,
    CASE WHEN capacity THEN 'exports' END,
    false, false, 0,
    CASE WHEN state = 'executing' THEN (ARRAY[:node1, :node2])[1 + g % 2] END,
    CASE WHEN state = 'executing' THEN md5('lease' || g)::uuid END,
    CASE WHEN state = 'executing' THEN CAST(:now AS timestamptz) + interval '20 seconds' END,
    0, CASE WHEN state = 'executing' THEN 300000 END,
    t,
    CASE state WHEN 'scheduled' THEN CAST(:now AS timestamptz) + (g % 3600) * interval '1 second'
               WHEN 'retryable' THEN CAST(:now AS timestamptz) + (g % 600) * interval '1 second'
               ELSE t END,
    CASE WHEN state IN ('scheduled', 'available') THEN NULL
         WHEN state = 'executing' THEN CAST(:now AS timestamptz) - (g % 60) * interval '1 second'
         ELSE t END,
    CASE WHEN state = 'completed' THEN t + interval '1 second' END,
    CASE WHEN state = 'cancelled' THEN t + interval '1 second' END,
    CASE WHEN state = 'discarded' THEN t + interval '1 second' END,
    CASE WHEN state IN ('completed', 'cancelled', 'discarded') THEN t + interval '1 second' END,
    t
FROM (
    SELECT g, t, state, queue,
        state IN ('discarded', 'retryable') OR (state = 'completed' AND g % 20 = 0) AS failed,
        queue = 'exports' AND state IN ('available', 'executing', 'scheduled') AS capacity
    FROM (
        SELECT g, t, r,
            CASE
                WHEN g > :n - :executing THEN 'executing'
                WHEN g <= :n * 0.95 THEN CASE
                    WHEN r < 0.955 THEN 'completed'
                    WHEN r < 0.980 THEN 'discarded'
                    WHEN r < 0.994 THEN 'cancelled'
                    WHEN r < 0.9995 THEN 'parked'
                    ELSE 'disabled' END
                ELSE CASE
                    WHEN r < 0.40 THEN 'available'
                    WHEN r < 0.65 THEN 'scheduled'
                    WHEN r < 0.75 THEN 'retryable'
                    ELSE 'completed' END
            END AS state,
            CASE
                WHEN u < 0.40 THEN 'default' WHEN u < 0.70 THEN 'mailers'
                WHEN u < 0.85 THEN 'webhooks' WHEN u < 0.90 THEN 'exports'
                WHEN u < 0.95 THEN 'reports' ELSE 'billing'
            END AS queue
        FROM (
            SELECT g, random() AS r, random() AS u,
                CAST(:start AS timestamptz) + g * CAST(:span AS interval) / :n AS t
            FROM generate_series(1, :n) AS g
        ) AS drawn
    ) AS assigned
) AS s
"""

# One run per attempt: a failed first attempt for jobs with errors, then the last attempt's
# outcome (open for executing jobs); cancelled and never-run jobs have none.
_RUNS_SQL = """
INSERT INTO {run} (
    job_id, attempt, queue, worker, node, lease_token, code_version, queue_ms,
    started_at, finished_at, duration_ms, outcome, error
)
SELECT id, a, queue, worker, (ARRAY[:node1, :node2])[1 + a % 2],
    CASE WHEN state = 'executing' AND a = attempt THEN lease_token ELSE gen_random_uuid() END,
    'v2026.11.3', 5 + a * 3,
    attempted_at - (attempt - a) * interval '30 seconds',
    CASE WHEN state = 'executing' AND a = attempt THEN NULL
         ELSE attempted_at - (attempt - a) * interval '30 seconds' + interval '250 milliseconds'
    END,
    CASE WHEN state = 'executing' AND a = attempt THEN NULL ELSE 250 END,
    CASE WHEN state = 'executing' AND a = attempt THEN NULL
         WHEN a < attempt OR state = 'retryable' THEN 'failed'
         WHEN state = 'discarded' THEN 'discarded'
         ELSE 'completed' END,
    CASE WHEN a < attempt OR state IN ('retryable', 'discarded') THEN errors -> 0 ->> 'error' END
FROM {job}, generate_series(1, attempt) AS a
WHERE attempted_at IS NOT NULL AND state <> 'cancelled'
"""

_QUEUES_SQL = """
INSERT INTO {queue} (name, paused, paused_at, paused_by, updated_at)
VALUES ('reports', true, CAST(:now AS timestamptz) - interval '4 minutes', 'oncall@ops', :now),
       ('default', false, NULL, NULL, :now)
"""

_AUDIT_SQL = """
INSERT INTO {audit} (at, actor, host, action, target_type, target, details)
SELECT CAST(:now AS timestamptz) - g * interval '5 minutes', 'oncall', 'ops-laptop',
    (ARRAY['retry', 'cancel', 'pause', 'resume', 'wake'])[1 + g % 5], 'job', md5(g::text),
    jsonb_build_object('n', g)
FROM generate_series(1, 2000) AS g
"""

_SETTINGS_SQL = """
INSERT INTO {setting} (namespace, key, value, updated_at, updated_by)
VALUES ('app.capacity', 'global_limit', '4', :now, 'oncall'),
       ('app.capacity', 'concurrency_key_limit', '1', :now, 'oncall')
"""


def fill(db: Database, n: int, now: datetime) -> None:
    """Replace the jobs and runs of ``db`` (PostgreSQL) with ``n`` jobs of history up to ``now``.

    Deterministic for a given ``n`` and ``now`` (``setseed``); nodes heartbeat at ``now``.
    """
    if not db.is_postgresql:
        raise ValueError("the dashboard history is generated with PostgreSQL's generate_series")
    reset(db)
    quote = db.engine.dialect.identifier_preparer.format_table
    t = db.tables
    names = {
        "job": quote(t.job),
        "run": quote(t.job_run),
        "queue": quote(t.queue),
        "audit": quote(t.audit),
        "setting": quote(t.setting),
    }
    params = {
        "now": now,
        "start": now - HISTORY_SPAN,
        "span": HISTORY_SPAN,
        "n": n,
        "executing": min(EXECUTING, n // 50),
        "node1": NODES[0][0],
        "node2": NODES[1][0],
        "capacity_meta": json.dumps(CAPACITY_META),
    }
    with db.begin() as conn:
        for table in (t.queue, t.audit, t.setting, t.node):
            conn.execute(table.delete())
        conn.execute(text("SELECT setseed(0.2026)"))
        conn.execute(text(_JOBS_SQL.format(**names)), params)
        conn.execute(text(_RUNS_SQL.format(**names)), params)
        for sql in (_QUEUES_SQL, _AUDIT_SQL, _SETTINGS_SQL):
            conn.execute(text(sql.format(**names)), params)
    for name, queues in NODES:
        host, pid, _ = name.split(":")
        heartbeat(
            db,
            NodeBeat(name, host, int(pid), queues, "v2026.11.3", 3, 19, now - timedelta(hours=2)),
            now,
        )
    vacuum_analyze(db)


def vacuum_analyze(db: Database) -> None:
    """``VACUUM ANALYZE`` the job and run tables (outside a transaction, as VACUUM needs)."""
    quote = db.engine.dialect.identifier_preparer.format_table
    with db.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        for table in (db.tables.job, db.tables.job_run):
            conn.execute(text(f"VACUUM ANALYZE {quote(table)}"))
