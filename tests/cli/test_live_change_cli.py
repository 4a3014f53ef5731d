"""``millrace modify`` and ``rescale``: argument parsing and the refusals made before any call
to the cluster (``load_transform``: NAME=FILE.py:FUNCTION)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from millrace.api.operators import TransformOperator
from millrace.cli.main import app
from millrace.cli.transform_file import load_transform
from millrace.errors import JobChangeError
from millrace.runtime.jobgraph.user_code import deserialize_user_code

FUNCTIONS = """
VERSION = 2


def tag(df):
    return ("tagged", VERSION, df)
"""


def test_load_transform_ships_the_function_by_value(tmp_path: Path) -> None:
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS)
    name, payload = load_transform(f"tag={path}:tag")
    path.unlink()  # travels by value: the file is not needed where it runs
    operator = deserialize_user_code(payload, "test")
    assert name == "tag" and isinstance(operator, TransformOperator) and operator.name == "tag"
    assert operator.fn("df") == ("tagged", 2, "df")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tag", "NAME=FILE.py:FUNCTION"),
        ("tag={dir}/functions.py", "NAME=FILE.py:FUNCTION"),
        ("={dir}/functions.py:tag", "NAME=FILE.py:FUNCTION"),
        ("tag={dir}/missing.py:tag", "no file"),
        ("tag={dir}/functions.py:untag", "defines no 'untag'"),
        ("tag={dir}/functions.py:VERSION", "'VERSION' in .* is not callable \\(a int\\)"),
        ("tag={dir}/broken.py:tag", "running .* failed: ZeroDivisionError"),
    ],
)
def test_load_transform_refusals(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "functions.py").write_text(FUNCTIONS)
    (tmp_path / "broken.py").write_text("1 / 0\n")
    with pytest.raises(JobChangeError, match=message):
        load_transform(spec.format(dir=tmp_path))


def test_modify_refuses_a_missing_function_before_calling_the_cluster(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["modify", "abc", "--replace", f"tag={tmp_path}/none.py:tag"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2, result.output
    assert "no file" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rescale", "abc"], "--parallelism"),
        (["rescale", "abc", "--parallelism", "0"], "greater than or equal to 1"),
        (["modify", "abc"], "--replace"),
    ],
)
def test_rescale_and_modify_arguments(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert message in result.output
