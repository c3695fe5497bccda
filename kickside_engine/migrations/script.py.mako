"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None
#: Expand/contract (docs/operating/migrations.md): code whose head is this revision or newer
#: runs on a schema at it. Name the previous revision for an expand step that older code
#: survives (a nullable column it never reads); delete the line for a contract step.
oldest_code_head = ${repr(up_revision)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
