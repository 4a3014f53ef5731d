"""The RPC package's structure (issue 10): transports composed over one EndpointRegistry, not
derived from each other; no module reaches into another's private names; small modules."""

from __future__ import annotations

import ast
from pathlib import Path

from millrace.rpc import LocalRpcService
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService

SRC = Path(__file__).resolve().parents[2] / "src" / "millrace"
MAX_MODULE_LINES = 500  # STYLE.md: aim under 500 lines a module


def private_imports(source: str, path: str) -> list[str]:
    """``path:line: what`` for every import of a private module or name of Millrace."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("millrace"):
            module = node.module or ""
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            module, names = "", [a.name for a in node.names if a.name.startswith("millrace")]
        else:
            continue
        dotted = [module, *names] if module else names
        parts = [p for d in dotted for p in d.split(".")]
        if any(p.startswith("_") and not p.startswith("__") for p in parts):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_checker_finds_private_imports() -> None:
    source = (
        "from millrace.rpc.local_rpc_service import LocalRpcService, _PendingLookup\n"
        "from millrace.rpc._futures import fail\n"
        "import millrace.rpc._futures\n"
        "from millrace.rpc import future_utils\n"
        "from __future__ import annotations\n"
        "from os import _exit\n"
    )
    assert [line.split(": ")[0] for line in private_imports(source, "m.py")] == [
        "m.py:1",
        "m.py:2",
        "m.py:3",
    ]


def test_neither_transport_derives_from_the_other() -> None:
    assert not issubclass(TcpRpcService, LocalRpcService)
    assert not issubclass(LocalRpcService, TcpRpcService)


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [
        line
        for module in sorted(SRC.rglob("*.py"))
        for line in private_imports(module.read_text(), str(module.relative_to(SRC)))
    ]
    assert found == []


def test_rpc_modules_stay_under_the_size_limit() -> None:
    sizes = {
        str(module.relative_to(SRC)): len(module.read_text().splitlines())
        for module in sorted((SRC / "rpc").rglob("*.py"))
    }
    assert {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES} == {}
