"""``NAME=FILE.py:FUNCTION``: a transform's new function for ``millrace modify``.

The file is run as a script (``runpy.run_path``, not imported), so its functions travel by value
with cloudpickle, as the functions of a job script do (``runtime/jobgraph/user_code.py``).
"""

from __future__ import annotations

import runpy
from pathlib import Path

from millrace.api.operators import TransformOperator
from millrace.errors import JobChangeError
from millrace.runtime.jobgraph.user_code import serialize_user_code

__all__ = ["load_transform"]


def load_transform(spec: str) -> tuple[str, bytes]:
    """Parse ``NAME=FILE.py:FUNCTION``, load FUNCTION from FILE, serialize it as the operator.

    Args:
        spec: The transform's operator name, the Python file and the function's name in it.

    Returns:
        ``(name, payload)``: the transform's name and its new ``TransformOperator`` as user-code
        bytes (``JobChangeRequest.payload``).

    Raises:
        JobChangeError: If ``spec`` is malformed, the file does not exist or fails to run, it
            has no FUNCTION, FUNCTION is not callable, or it cannot be serialized.
    """
    name, eq, location = spec.partition("=")
    file, colon, function = location.rpartition(":")
    if not (eq and colon and name and file and function):
        raise JobChangeError(f"--replace takes NAME=FILE.py:FUNCTION, got {spec!r}")
    path = Path(file).expanduser()
    if not path.is_file():
        raise JobChangeError(f"--replace {name}: no file {str(path)!r}")
    try:
        namespace = runpy.run_path(str(path))
    except Exception as error:
        raise JobChangeError(
            f"--replace {name}: running {str(path)!r} failed: {type(error).__name__}: {error}"
        ) from error
    if function not in namespace:
        raise JobChangeError(f"--replace {name}: {str(path)!r} defines no {function!r}")
    fn = namespace[function]
    if not callable(fn):
        raise JobChangeError(
            f"--replace {name}: {function!r} in {str(path)!r} is not callable "
            f"(a {type(fn).__name__}); give a function DataFrame -> DataFrame"
        )
    try:
        payload = serialize_user_code(TransformOperator(fn=fn, name=name), f"transform {name!r}")
    except Exception as error:
        raise JobChangeError(f"--replace {name}: {error}") from error
    return name, payload
