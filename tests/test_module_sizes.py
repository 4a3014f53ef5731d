"""Small modules, one concept each (issue 10): no module of Millrace but the configuration's
list of options above 500 lines, and the JobMaster a gateway adapter of about 300."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "millrace"
MAX_MODULE_LINES = 500  # STYLE.md: aim under 500 lines a module
EXEMPT = {"config.py"}  # every option with its key, default and description


def lines_of(module: Path) -> int:
    return len(module.read_text().splitlines())


def test_no_module_but_the_configuration_is_above_the_size_limit() -> None:
    sizes = {str(m.relative_to(SRC)): lines_of(m) for m in sorted(SRC.rglob("*.py"))}
    too_big = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES and m not in EXEMPT}
    assert too_big == {}


def test_the_job_master_stays_a_gateway_adapter() -> None:
    assert lines_of(SRC / "runtime" / "jobmaster" / "job_master.py") <= 320
