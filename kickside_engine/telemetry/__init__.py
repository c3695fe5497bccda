"""Telemetry built on the registry's middleware and hooks, each behind an optional extra.

:mod:`kickside_engine.telemetry.otel` (``kickside[otel]``): OpenTelemetry spans per execution,
linked to the enqueuing span. Nothing here is imported unless the application imports it.
"""
