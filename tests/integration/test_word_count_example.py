"""examples/word_count.py on a real text (Debian's license texts) against Python's own count."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from tests.integration.helpers import load_example, read_output

pytestmark = [pytest.mark.slow, pytest.mark.spark]

word_count = load_example("word_count")
LICENSES = Path("/usr/share/common-licenses")


def python_count(directory: Path) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(p for p in directory.iterdir() if not p.name.startswith((".", "_"))):
        for line in path.read_text(encoding="utf-8").splitlines():
            counts.update(w for w in re.split(word_count.WORD, line.lower()) if w)
    return dict(counts)


@pytest.mark.parametrize("parallelism", [1, 3])
def test_word_count_of_the_license_texts_equals_python(spark, tmp_path, parallelism) -> None:
    assert LICENSES.is_dir(), "Debian's base-files ships /usr/share/common-licenses"
    conf = Configuration({"parallelism.default": parallelism, "io.tmp.dirs": str(tmp_path / "tmp")})
    env = StreamExecutionEnvironment(conf, spark)
    word_count.build(env, str(LICENSES), str(tmp_path / "out"))
    env.execute("word-count")

    out = read_output(tmp_path / "out", order=("word",))
    expected = python_count(LICENSES)
    assert out["word"].is_unique
    assert dict(zip(out["word"], out["n"], strict=True)) == expected
    assert expected["license"] > 100  # a real text, not an empty one
