"""The pages' code holds: Python appears only as included example files (which run), every
`kickside` command line names a real command and real options, the deploy files' worker
commands make valid pools, the README's example runs, dashboard keys the pages name exist, and
the API page documents every public name."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import yaml

import kickside_engine
from kickside_engine.runtime import PoolConfig, parse_duration, parse_queue_leases, parse_queues

from ..support.processes import ROOT
from .support import (
    DOCS,
    EXAMPLES,
    PAGES,
    SNIPPET,
    blocks,
    check_kickside_command,
    command_lines,
    example_env,
    hook,
    run,
)

README = ROOT / "README.md"
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
DEPLOY = EXAMPLES / "deploy"


def test_python_on_the_pages_is_only_included_example_files() -> None:
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "python":
                assert SNIPPET.fullmatch(block.body.strip()), (
                    f"{block.where()}: put the code in docs/examples/ and include it"
                )


def test_the_readme_example_runs(tmp_path: Path) -> None:
    code = [b.body for b in blocks(README) if b.lang == "python"]
    assert len(code) == 1, "the README has one example"
    script = tmp_path / "readme_example.py"
    script.write_text(code[0])
    out = run([sys.executable, str(script)], tmp_path, example_env(tmp_path, tmp_path))
    assert "completed" in out, out


def _console_commands() -> list[tuple[str, list[str]]]:
    """`kickside` command lines in console blocks, and in the text's code spans."""
    found = []
    for page in [*PAGES, README]:
        for block in blocks(page):
            if block.lang in ("console", "bash", "sh", "shell"):
                found += [(block.where(), argv) for argv in command_lines(block.body)]
        text = FENCED.sub("", page.read_text())
        for span in re.findall(r"`(kickside [^`]+)`", text):
            if "COMMAND" in span:
                continue  # `kickside COMMAND --help`: any command
            found += [(f"{page.name}: `{span}`", argv) for argv in command_lines(span)]
    return found


def _deploy_commands() -> list[tuple[str, list[str], dict[str, str]]]:
    """`kickside` command lines of the systemd unit and the Kubernetes manifests, with the
    environment each container sets."""
    found = []
    unit = (DEPLOY / "kickside-worker.service").read_text()
    for line in unit.splitlines():
        if line.startswith(("ExecStart=", "ExecStartPre=")):
            argv = shlex.split(line.split("=", 1)[1])
            found.append(("kickside-worker.service", ["kickside", *argv[1:]], {}))
    for document in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()):
        for container in document["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e["value"] for e in container.get("env", [])}
            found.append((f"kubernetes.yaml {container['name']}", container["command"], env))
    return found


def _probe_commands() -> list[tuple[str, list[str]]]:
    """The Kubernetes probes' `kickside` command lines (``sh -c "exec kickside ..."``)."""
    found = []
    for document in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()):
        for container in document["spec"]["template"]["spec"]["containers"]:
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                if probe in container:
                    shell, flag, script = container[probe]["exec"]["command"]
                    assert (shell, flag) == ("sh", "-c")
                    argv = shlex.split(script.replace("$HOSTNAME", "pod-1"))
                    assert argv[0] == "exec"
                    found.append((f"kubernetes.yaml {container['name']} {probe}", argv[1:]))
    return found


def test_every_command_on_the_pages_exists_with_its_options() -> None:
    commands = _console_commands()
    assert len(commands) > 100
    for where, argv in commands:
        check_kickside_command(argv, where)


def test_the_deploy_files_start_valid_pools() -> None:
    found = _deploy_commands()
    assert {argv[1] for _, argv, _ in found} == {"worker", "migrate"}
    for where, argv, env in found:
        command = check_kickside_command(argv, where)
        if argv[1] != "worker":
            continue
        given = dict(zip(argv[2::2], argv[3::2], strict=False))
        defaults = {p.opts[0]: p.default for p in command.params}
        lease = given.get("--lease") or env.get("KICKSIDE_LEASE") or "30s"
        PoolConfig(
            app=given["--app"],
            queues=parse_queues(given.get("--queues", defaults["--queues"])),
            lease=parse_duration(lease),
            queue_leases=parse_queue_leases(given.get("--queue-leases", "")),
        )


def test_the_kubernetes_probe_is_the_tested_readiness_command() -> None:
    # tests/cli/test_health_probe_cli.py runs this command against a real pool.
    probes = _probe_commands()
    assert [argv for _, argv in probes] == [["kickside", "nodes", "--host", "pod-1", "--check"]]
    for where, argv in probes:
        check_kickside_command(argv, where)


def test_dashboard_keys_the_pages_name_are_bound() -> None:
    generate = hook("generate")
    keys_page = generate.dashboard_keys()
    bound = set(re.findall(r"\| `([^`]+)` \|", keys_page))
    for name in ("operating/runbook.md", "guides/slots.md"):
        text = (DOCS / name).read_text()
        for key in re.findall(r"\(`(\w)`\)|\| `(\w)` \|$", text, re.MULTILINE):
            assert (key[0] or key[1]) in bound, f"{name}: `{key}` is bound nowhere"
        for view in re.findall(r"view `(\d)`", text):
            assert f"`{view}`" in keys_page, f"{name}: no view {view}"


def test_the_api_page_documents_every_public_name() -> None:
    page = (DOCS / "reference" / "api.md").read_text()
    documented = {line.rsplit(".", 1)[-1] for line in re.findall(r"^::: (\S+)$", page, re.M)}
    assert set(kickside_engine.__all__) <= documented, set(kickside_engine.__all__) - documented


def test_the_references_are_generated_from_the_code() -> None:
    from kickside_engine.models import TRANSITIONS
    from kickside_engine.store.tables import TABLES

    generate = hook("generate")
    states = generate.states()
    for source, targets in TRANSITIONS.items():
        for target in targets:
            assert f"    {source.value} --> {target.value}\n" in states
    schema = generate.schema()
    for table in TABLES.metadata.tables.values():
        assert f"## `{table.name}`" in schema
        for column in table.columns:
            assert f"`{column.name}`" in schema
    reference = generate.expand("<!-- generate: cli -->")
    for path in hook("cli_reference").command_paths():
        assert f"### `kickside {path}`" in reference, path
    try:
        generate.expand("<!-- generate: nothing -->")
    except ValueError as exc:
        assert "nothing" in str(exc)
    else:
        raise AssertionError("an unknown marker must fail the build")
