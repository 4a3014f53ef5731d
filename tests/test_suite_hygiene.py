"""The suite's own rules, checked on its source so that the gaps they close cannot reopen.

1. Every wait is bounded: none of the source's unbounded timeouts (constants of a year or
   more, such as the JobClient's default), no ``.result()``, ``.exception()``, ``.join()``,
   ``.wait()``, ``.get()``, ``.acquire()`` or ``.communicate()`` without a timeout, no
   ``subprocess.run`` (or ``check_output``, ``check_call``, ``call``) without ``timeout=``. A
   wait bounded by other means says so on its line: ``# bounded: <what ends it>``.
2. No silent skips: ``pytest.skip``, ``pytest.importorskip`` and the ``skip``/``skipif`` marks
   appear only in ``tests/real_parts.py``, which fails unless the run was started with
   ``--allow-skip`` (``make test ALLOW_SKIP=1``), and in the probes of ``test_real_parts.py``.
3. A failover test loses its TaskManager abruptly (``tests/faults.py``): no ``close_async()``
   in an end-to-end test (``tests/integration``) or in a test named for a loss or a crash,
   unless the test is named for a graceful shutdown.
4. No sleep-then-assert: a ``time.sleep(...)`` followed within three lines by an ``assert``
   is a negative check ("X does not happen") that a slow machine passes without X having had
   its chance. Such a check waits for a positive event proving the system went past the point
   where X would have happened (a later heartbeat, registration attempt or checkpoint; a round
   trip through an endpoint's mailbox after the messages that could carry X). A sleep in a
   ``while`` loop is a poll interval and is not flagged. A sleep that is the fault itself (a
   pause that must last) says so on its line, ``# fault injection: <what lasts>``, and the
   assertion after it still waits for a positive event.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.runtime.client import job_client

TESTS = Path(__file__).resolve().parent

# The source's "wait as long as the job" timeouts: module constants (s) of a year or more.
_UNBOUNDED = frozenset(
    name
    for name, value in vars(job_client).items()
    if name.isupper() and isinstance(value, float) and value >= 365 * 86400.0
)

# Methods that block until something happens unless given a timeout (positional or keyword).
_BLOCKING_METHODS = {"result", "exception", "join", "wait", "get", "acquire", "communicate"}
# ``communicate(input)``: its first positional argument is not a timeout.
_TIMEOUT_KEYWORD_ONLY = {"communicate"}
_SUBPROCESS_CALLS = {"run", "check_output", "check_call", "call"}
_SKIPS = {"skip", "importorskip", "skipif"}
# real_parts.py is the one place that skips; test_real_parts.py's probes skip on purpose, in
# the pytest subprocesses that check a run with a skip fails (never collected otherwise)
_SKIP_ALLOWED = {"real_parts.py", "test_real_parts.py"}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}"


def _has_timeout(call: ast.Call, name: str) -> bool:
    if any(k.arg in ("timeout", None) for k in call.keywords):  # None: **kwargs passed on
        return True
    return bool(call.args) and name not in _TIMEOUT_KEYWORD_ONLY


# Rule 4: lines after a sleep within which an assert makes it a sleep-then-assert check.
_SLEEP_ASSERT_LINES = 3
_FAULT_MARKER = "# fault injection:"
# Rule 4's known offenders, to be fixed (issue 29): (path under tests/, the sleep's line,
# stripped). Nothing is to be added here; an entry goes once its check waits for an event
# (a changed line is flagged again).
_PENDING_SLEEPS: frozenset[tuple[str, str]] = frozenset()


def _is_sleep(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "sleep" and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id == "sleep"


def _sleeps_then_asserts(tree: ast.AST, lines: list[str], path: str) -> list[Violation]:
    """Rule 4: every ``time.sleep`` outside a ``while`` loop (in the same function) with an
    ``assert`` statement starting within ``_SLEEP_ASSERT_LINES`` lines after it."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    found = []
    for node in ast.walk(tree):
        if not _is_sleep(node) or _FAULT_MARKER in lines[node.lineno - 1]:
            continue
        outer = parents.get(node)
        while outer is not None and not isinstance(
            outer, ast.While | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            outer = parents.get(outer)
        if isinstance(outer, ast.While):
            continue  # a poll interval: the loop's condition is what it waits for
        end = node.end_lineno or node.lineno
        if any(end < line <= end + _SLEEP_ASSERT_LINES for line in asserts):
            found.append(
                Violation(
                    path,
                    node.lineno,
                    "sleep then assert: wait for a positive event (or mark "
                    f"'{_FAULT_MARKER} ...' a sleep that is the fault itself)",
                )
            )
    return found


def check_source(source: str, path: str = "<test>") -> list[Violation]:
    """The rule violations in one test module's source."""
    found: list[Violation] = []
    tree = ast.parse(source)
    lines = source.splitlines()
    found += _sleeps_then_asserts(tree, lines, path)
    skip_allowed = Path(path).name in _SKIP_ALLOWED
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _UNBOUNDED:
            found.append(Violation(path, node.lineno, f"{node.id}: every wait has a deadline"))
        elif isinstance(node, ast.alias) and node.name in _UNBOUNDED:
            found.append(Violation(path, 0, f"imports {node.name}"))
        elif isinstance(node, ast.Attribute) and node.attr in _SKIPS and not skip_allowed:
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "pytest") or (
                isinstance(base, ast.Attribute) and base.attr == "mark"
            ):
                found.append(
                    Violation(
                        path,
                        node.lineno,
                        f"{node.attr}: a missing part fails the test (tests.real_parts)",
                    )
                )
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if "# bounded:" in lines[node.lineno - 1]:
            continue
        if name in _BLOCKING_METHODS and not _has_timeout(node, name):
            found.append(Violation(path, node.lineno, f".{name}() without a timeout"))
        elif (
            name in _SUBPROCESS_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "subprocess"
            and not any(k.arg == "timeout" for k in node.keywords)
        ):
            found.append(Violation(path, node.lineno, f"subprocess.{name} without timeout="))
    return found


def test_the_source_has_an_unbounded_timeout_to_keep_out_of_the_tests() -> None:
    assert _UNBOUNDED  # else the rule below checks nothing: the constant moved or changed


def test_the_checker_finds_each_kind_of_unbounded_wait_and_skip() -> None:
    [unbounded] = sorted(_UNBOUNDED)
    bad = f"""
import pytest, subprocess
from millrace.runtime.client.job_client import {unbounded}
f.result()
f.result(timeout={unbounded})
f.exception()
thread.join()
event.wait()
queue.get()
lock.acquire()
process.communicate(b"x")
subprocess.run(["ps"])
pytest.skip("no postgres")
pytest.importorskip("kazoo")
@pytest.mark.skipif(True, reason="x")
def test(): ...
"""
    rules = [v.rule for v in check_source(bad)]
    assert len([r for r in rules if "without a timeout" in r]) == 7, rules
    assert len([r for r in rules if unbounded in r]) == 2, rules  # the import, the use
    assert len([r for r in rules if "subprocess.run" in r]) == 1, rules
    assert len([r for r in rules if "tests.real_parts" in r]) == 3, rules


def test_the_checker_accepts_bounded_waits() -> None:
    good = """
termination.wait()  # bounded: the watchdog stops it after LIFETIME
f.result(30)
f.result(timeout=WAIT)
f.exception(timeout=1)
thread.join(5)
event.wait(timeout=2)
queue.get(timeout=1)
mapping.get("key")
", ".join(parts)
process.communicate(timeout=60)
subprocess.run(["ps"], timeout=10)
"""
    assert check_source(good) == []


def test_the_checker_finds_a_sleep_then_assert() -> None:
    bad = """
def test_live_one_stays():
    time.sleep(1.0)  # many heartbeat intervals
    assert registered == ["tm-live"]

def test_no_offer():
    request()
    sleep(0.1)

    assert offers == []
"""
    assert [v.line for v in check_source(bad)] == [3, 8]


def test_the_checker_accepts_poll_loops_marked_faults_and_distant_asserts() -> None:
    good = """
def test_poll():
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert done()

def test_pause():
    time.sleep(0.5)  # fault injection: the partition lasts half a second
    wait_until(lambda: checkpoints() > 2, what="2 more checkpoints")
    assert dropped == []

def test_later():
    time.sleep(0.5)
    one()
    two()
    three()
    assert four()
"""
    assert check_source(good) == []


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.name != Path(__file__).name)


def _pending(violation: Violation) -> bool:
    path = Path(violation.path)
    if not violation.rule.startswith("sleep then assert") or not path.is_relative_to(TESTS):
        return False
    line = path.read_text().splitlines()[violation.line - 1].strip()
    return (path.relative_to(TESTS).as_posix(), line) in _PENDING_SLEEPS


def test_no_test_waits_without_a_deadline_or_skips_silently() -> None:
    violations = [v for path in _test_modules() for v in check_source(path.read_text(), str(path))]
    violations = [v for v in violations if not _pending(v)]
    assert not violations, "\n".join(str(v) for v in violations)


_FAILOVER_WORDS = ("lost", "crash", "kill", "killed", "dies", "died", "failover")


def test_failover_tests_lose_task_managers_abruptly() -> None:
    """A test that claims to survive a lost TaskManager must not stop it gracefully."""
    offenders = []
    for path in _test_modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            end_to_end = path.parent.name == "integration"
            claims_loss = any(w in node.name for w in _FAILOVER_WORDS)
            if "graceful" in node.name or not (end_to_end or claims_loss):
                continue
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr == "close_async"
                ):
                    offenders.append(f"{path}:{inner.lineno}: {node.name} uses close_async()")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("rule", ["timeout", "timeout_method"])
def test_pytest_timeout_is_configured(pytestconfig: pytest.Config, rule: str) -> None:
    assert pytestconfig.getini(rule), f"pyproject.toml sets no pytest-timeout {rule}"
