"""The exception tree (issue 10): one root, every class in ``millrace/errors.py``, each
documented with the attributes it carries."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from millrace import errors

SRC = Path(__file__).resolve().parents[1] / "src" / "millrace"
ERRORS = SRC / "errors.py"
BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def exception_classes_outside_errors(source: str, path: str) -> list[str]:
    """``path:line: Class`` for every class deriving from a builtin exception or from a class
    of ``millrace.errors``."""
    bases_of_errors = set(errors.__all__) | BUILTIN_EXCEPTIONS
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
        if names & bases_of_errors:
            found.append(f"{path}:{node.lineno}: {node.name}")
    return found


def test_the_checker_finds_exception_classes() -> None:
    source = (
        "class A(Exception): ...\n"
        "class B(errors.PipelineError): ...\n"
        "class C(JobCancelledError): ...\n"
        "class D(Protocol): ...\n"
    )
    assert exception_classes_outside_errors(source, "m.py") == [
        "m.py:1: A",
        "m.py:2: B",
        "m.py:3: C",
    ]


def test_every_exception_class_is_defined_in_errors_py() -> None:
    found = [
        line
        for module in sorted(SRC.rglob("*.py"))
        if module != ERRORS
        for line in exception_classes_outside_errors(
            module.read_text(), str(module.relative_to(SRC))
        )
    ]
    assert found == []


def test_errors_py_holds_one_tree_rooted_at_millrace_error() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }
    assert defined == {n for n in errors.__all__ if isinstance(getattr(errors, n), type)}
    assert all(issubclass(getattr(errors, name), errors.MillraceError) for name in defined)


def test_every_error_documents_the_attributes_it_carries() -> None:
    undocumented = []
    for node in ast.parse(ERRORS.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docstring = ast.get_docstring(node) or ""
        if not docstring:
            undocumented.append(f"{node.name}: no docstring")
        attributes = {
            target.attr
            for init in node.body
            if isinstance(init, ast.FunctionDef) and init.name == "__init__"
            for statement in ast.walk(init)
            if isinstance(statement, ast.Assign)
            for target in statement.targets
            if isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        }
        section = docstring.partition("Attributes:")[2]
        missing = sorted(a for a in attributes if f"{a}:" not in section)
        if missing:
            undocumented.append(f"{node.name}: {', '.join(missing)}")
    assert undocumented == []
