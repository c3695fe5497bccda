"""The one command: ``python -m bench.run [--quick] [--only NAME] [--database-url URL]``.

Runs the selected workloads on a throwaway PostgreSQL schema and a temporary SQLite file,
records the machine, its load and the versions, then writes ``bench/results/<UTC>.json`` and a
Markdown table beside it, and prints the table. ``--quick`` scales every count by 1/20: a
smoke test of the harness, never a measurement. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from bench import catalog, machine, report
from bench.interrupt import check_terminated, exit_on_sigterm
from bench.nodes import POOL_COUNTS
from bench.peers import runner
from bench.targets import (
    BACKENDS,
    DEFAULT_POSTGRES_URL,
    Target,
    checkpoint,
    postgresql_target,
    sqlite_target,
)
from bench.workloads.common import Context, Measurement
from bench.workloads.pools import SharedPool
from kickside_engine.redact import redact_text
from kickside_engine.store.sqlite_durability import synchronous_mode

QUICK_SCALE = 1 / 20
RESULTS_DIR = Path(__file__).resolve().parent / "results"
URL_ENV = "KICKSIDE_BENCH_DATABASE_URL"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description="Kickside's reproducible benchmark harness."
    )
    parser.add_argument(
        "--quick", action="store_true", help="scale every count by 1/20 (a smoke run)"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only these workloads (repeatable, or comma-separated): "
        + ", ".join(w.name for w in catalog.WORKLOADS),
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(URL_ENV, DEFAULT_POSTGRES_URL),
        help=f"the PostgreSQL server (env {URL_ENV}; default: the local test server)",
    )
    parser.add_argument(
        "--schema", help="the PostgreSQL schema to create, use and drop (default: bench_<UTC>)"
    )
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="all")
    parser.add_argument(
        "--sqlite-path", type=Path, help="the SQLite file to use (default: a temporary file)"
    )
    parser.add_argument(
        "--sqlite-synchronous",
        choices=["normal", "full"],
        help="Kickside's SQLite durability mode (?synchronous= on its URL; default: the "
        "engine's, normal, or KICKSIDE_SQLITE_SYNCHRONOUS): full to compare with Huey's default",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument(
        "--no-pgbench",
        action="store_true",
        help="skip the baselines (pgbench's, and its insert sent by psycopg)",
    )
    parser.add_argument(
        "--peers",
        default=",".join(runner.PEERS),
        help="comma-separated peers to run after Kickside (default: all; huey on SQLite, "
        "the others on PostgreSQL)",
    )
    parser.add_argument("--no-peers", action="store_true", help="run Kickside only")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    parser.add_argument(
        "--pool-counts",
        type=_pool_counts,
        default=POOL_COUNTS,
        metavar="N,N,...",
        help="multi_node's pool process counts, increasing (default: 1,2,4)",
    )
    return parser.parse_args(argv)


def _pool_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(n) for n in text.split(","))
    except ValueError:
        counts = ()
    if not counts or counts[0] < 1 or list(counts) != sorted(set(counts)):
        raise argparse.ArgumentTypeError(f"{text!r}: want increasing counts like 1,2,4")
    return counts


def _names(only: list[str] | None) -> list[str]:
    return [n.strip() for item in only or [] for n in item.split(",") if n.strip()]


class Progress:
    """Progress lines on stderr, with the seconds since the run began."""

    def __init__(self) -> None:
        self.origin = time.monotonic()

    def __call__(self, message: str) -> None:
        check_terminated()  # a SIGTERM whose raise was lost stops the run here
        print(f"[bench {time.monotonic() - self.origin:6.1f}s] {message}", file=sys.stderr)


def _run_workloads(
    target: Target, workloads: list[catalog.Workload], ctx: Context, progress: Progress
) -> list[Measurement]:
    measured = []
    for workload in workloads:
        if target.backend not in workload.backends:
            continue
        if not workload.uses_pool and ctx.shared_pool is not None:
            ctx.shared_pool.close()
        progress(f"{target.backend}: {workload.title}")
        if target.backend == "postgresql":
            checkpoint(target.url, progress)
        try:
            measured.append(workload.run(ctx))
        except Exception as exc:
            traceback.print_exc()
            measured.append(
                Measurement(
                    workload=workload.name,
                    backend=target.backend,
                    error=f"{type(exc).__name__}: {exc}".splitlines()[0],
                )
            )
    return measured


def _run_peers(
    args: argparse.Namespace,
    workloads: list[catalog.Workload],
    scale: float,
    schema: str,
    workdir: Path,
    progress: Progress,
    backend: str = "postgresql",
) -> list[dict[str, Any]]:
    """The peers' results on ``backend``, one peer at a time: on PostgreSQL each on a schema
    of its own, on SQLite (Huey) each mode on a file of its own."""
    counts = catalog.peer_counts(workloads, scale)
    on_sqlite = backend == "sqlite"
    peers = [
        p.strip()
        for p in args.peers.split(",")
        if p.strip() and (p.strip() in runner.SQLITE_PEERS) == on_sqlite
    ]
    if on_sqlite:
        counts = {w: n for w, n in counts.items() if w in runner.SQLITE_WORKLOADS}
    else:
        counts = {w: n for w, n in counts.items() if w not in runner.SQLITE_ONLY_WORKLOADS}
    if not counts or not peers:
        return []
    pythons: dict[str, Path | str] = {}
    for venv, setup in ((runner.VENV, runner.ensure_venv), (runner.VENV312, runner.ensure_venv312)):
        wanted = [p for p in peers if (p in runner.IN_VENV312) == (venv == runner.VENV312)]
        if not any(runner.counts_for(p, counts) for p in wanted):
            continue
        found: Path | str
        try:
            found = setup(progress)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"error: could not set up {venv}: {exc}", file=sys.stderr)
            found = f"could not set up {venv}: {exc}"  # the reason, for each of its peers
        pythons.update(dict.fromkeys(wanted, found))
    results: list[dict[str, Any]] = []
    for peer in peers:
        peer_counts = runner.counts_for(peer, counts)
        if not peer_counts:
            continue
        python = pythons[peer]
        if isinstance(python, str):
            results += runner.failed(peer, peer_counts, python, backend)
            continue
        if on_sqlite:
            results += runner.run_sqlite_peer(
                python, peer, counts=peer_counts, workdir=workdir, progress=progress
            )
            continue
        results += runner.run_peer(
            python,
            peer,
            url=args.database_url,
            schema=f"{schema}_{peer}",
            counts=peer_counts,
            workdir=workdir,
            progress=progress,
            history=catalog.history_sizes(scale),
            pool_counts=args.pool_counts,
        )
    return results


def _plot(json_path: Path, progress: Progress) -> None:
    """Draw ``<stem>.png`` beside the results with the tools' environment (matplotlib)."""
    python = runner.VENV / "bin" / "python"
    if not python.exists():
        progress(f"no plot: {runner.VENV} does not exist (run once with the peers to create it)")
        return
    proc = subprocess.run(
        [str(python), "-m", "bench.plot", str(json_path)],
        cwd=runner.BENCH.parent,
        env={**os.environ, "PYTHONPATH": str(runner.BENCH.parent)},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        progress(f"no plot: {last}")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; 0 when every workload ran, else 1."""
    try:
        workloads = catalog.by_name(_names(args.only))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unknown = [p for p in args.peers.split(",") if p.strip() and p.strip() not in runner.PEERS]
    if unknown:
        print(
            f"error: unknown peer {', '.join(unknown)}; known: {', '.join(runner.PEERS)}",
            file=sys.stderr,
        )
        return 2
    progress = Progress()
    started = datetime.now(UTC)
    scale = QUICK_SCALE if args.quick else 1.0
    info = machine.machine_info()
    warnings = [w for w in [machine.load_warning(info["load_average"])] if w]
    for warning in warnings:
        print(f"\n!!! WARNING: {warning} !!!\n", file=sys.stderr)
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    wanted = {b for w in workloads for b in w.backends} & set(backends)
    backends = [b for b in backends if b in wanted]
    workdir = Path(tempfile.mkdtemp(prefix="kickside-bench-"))
    results: list[dict[str, Any]] = []
    baselines: dict[str, Any] = {}
    peers_schema = ""
    sqlite_mode: str | None = None
    for backend in backends:
        with contextlib.ExitStack() as stack:
            if backend == "postgresql":
                target = stack.enter_context(postgresql_target(args.database_url, args.schema))
                peers_schema = f"{target.schema}_peer"
                if not args.no_pgbench:
                    progress("postgresql: pgbench single-row insert baseline")
                    assert target.schema is not None
                    baselines["pgbench_insert"] = machine.pgbench_insert_tps(
                        args.database_url, target.schema, seconds=2 if args.quick else 10
                    )
                    progress("postgresql: the same insert from Python (psycopg) baseline")
                    baselines["psycopg_insert"] = machine.psycopg_insert_tps(
                        args.database_url, target.schema, seconds=2 if args.quick else 10
                    )
                    progress("postgresql: pgbench running Kickside's single-enqueue statement")
                    baselines["pgbench_enqueue"] = machine.pgbench_enqueue_tps(
                        args.database_url, target.schema, seconds=2 if args.quick else 10
                    )
                    progress("postgresql: pgbench simple-update baseline, 10 clients")
                    baselines["pgbench_update"] = machine.pgbench_update_tps(
                        args.database_url, target.schema, seconds=2 if args.quick else 10
                    )
            else:
                target = stack.enter_context(
                    sqlite_target(args.sqlite_path, args.sqlite_synchronous)
                )
                sqlite_mode = synchronous_mode(make_url(target.url))
                progress(f"sqlite: Kickside's single-enqueue statement on sqlite3 ({sqlite_mode})")
                baselines["sqlite_enqueue"] = machine.sqlite_enqueue_ceiling(target.url)
            shared = SharedPool(target, workdir / f"pool-{backend}.log")
            stack.callback(shared.close)
            ctx = Context(
                target=target,
                scale=scale,
                workdir=workdir,
                progress=progress,
                shared_pool=shared,
                pool_counts=args.pool_counts,
            )
            results += [m.as_json() for m in _run_workloads(target, workloads, ctx, progress)]
        if not args.no_peers:
            results += _run_peers(args, workloads, scale, peers_schema, workdir, progress, backend)
    pg_used = "postgresql" in backends
    versions = machine.versions(args.database_url if pg_used else None)
    for entry in results:
        if entry["system"] != "kickside" and entry["details"].get("version"):
            versions[entry["system"]] = entry["details"]["version"]
    info["load_average_at_end"] = machine.machine_info()["load_average"]
    doc = {
        "format": report.FORMAT,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": redact_text("python -m bench.run " + shlex.join(args.argv)),
        "quick": args.quick,
        "scale": scale,
        "backends": backends,
        "machine": info,
        "warnings": warnings,
        "versions": versions,
        "baselines": baselines,
        "sqlite_synchronous": sqlite_mode,
        "results": results,
    }
    json_path, md_path = report.write(doc, args.results_dir, report.file_stem(started))
    print(report.markdown(doc))
    if not args.no_plot:
        _plot(json_path, progress)
    failed = [m for m in results if m["error"]]
    if failed:
        print(f"{len(failed)} workload(s) failed; pool logs kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.run``."""
    args = parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    exit_on_sigterm()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
