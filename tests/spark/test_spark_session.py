"""The data plane's SparkSession: Python UDFs run on this environment's interpreter."""

from __future__ import annotations

import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_python_udfs_run_with_this_environments_packages(spark) -> None:
    from pyspark.sql import functions as F

    def interpreter(_):  # no hints: PySpark would read them as a pandas UDF type
        import sys

        import pyarrow  # a package of this environment, not of the PATH's python3

        return f"{sys.executable} {pyarrow.__version__}"

    ran = spark.range(2).select(F.udf(interpreter, "string")("id").alias("who")).collect()
    import pyarrow

    assert {row.who for row in ran} == {f"{sys.executable} {pyarrow.__version__}"}
