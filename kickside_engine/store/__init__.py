"""The store: every statement that writes, locks or differs by dialect, and the wake signal.

Tables (:mod:`.tables`), the database handle (:mod:`.database`), inserts and COPY
(:mod:`.inserts`), claims and leases (:mod:`.claims`, :mod:`.keyed_claims`), job locks and row
moves (:mod:`.jobs`), the settle statement that records how an attempt ended (:mod:`.settle`),
run history (:mod:`.history`), settings, nodes, the audit row, maintenance pages for the plugins
and purge, and NOTIFY/LISTEN (:mod:`.notify`, :mod:`.listen`) all live here, so that a dialect
difference or a locking rule is written once.

The rule: ``store`` imports nothing above it. Its modules import only each other and the
foundation modules (:mod:`kickside_engine.clock`, ``config``, ``errors``, ``ids``, ``models``,
``redact``, ``text``); everything else in the engine (enqueue, wake, slots, the runtime, the
plugins, the operator API in :mod:`kickside_engine.control`) calls into it. A test
(``tests/test_layering.py``) checks both this rule and that no module outside ``store``,
``control`` and the migrations builds SQL.
"""
