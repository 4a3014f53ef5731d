"""HTTP ingest: orders POSTed as JSON lines, counted per product in 1-minute windows.

The records come from clients, not from a source that can replay them: an ``HttpSource`` keeps
them in its log (segments under ``<io.tmp.dirs>/http-sources/<job>/orders``) and answers 202
only once they are durable there, so a TaskManager that dies loses nothing; the job replays the
log from its last checkpoint and the output stays exactly-once. Lines that are not JSON of the
schema go to the dead-letter side output with the reason.

Run on a standalone cluster (``millrace cluster start``, ``millrace taskmanager start``)::

    millrace run --jobmanager 127.0.0.1:6123 examples/http_ingest.py [OUTPUT_DIR]
    TOKEN=$(millrace cluster token)
    curl -H "Authorization: Bearer $TOKEN" --data-binary @- \\
        http://127.0.0.1:8089/sources/orders/records <<'EOF'
    {"product": "tea", "quantity": 2, "ordered_at": "2026-11-27T10:00:05Z"}
    {"product": "coffee", "quantity": 1, "ordered_at": "2026-11-27T10:00:07Z"}
    EOF

The answer is ``{"first_offset": 0, "next_offset": 2, "records": 2}`` (HTTP 202).
Output columns: product, window_start, window_end, orders, quantity (Parquet).
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from millrace import HttpSource, ParquetSink, StreamExecutionEnvironment, tumbling

SCHEMA = "product string, quantity int, ordered_at timestamp"


def build(env: StreamExecutionEnvironment, output_dir: str) -> None:
    """Add the pipeline to ``env``: HttpSource ``orders`` -> 1-minute windows per product."""
    (
        env.from_source(
            HttpSource(SCHEMA, name="orders"),
            event_time="ordered_at",
            max_out_of_orderness="10 s",
            name="orders",
        )
        .key_by("product")
        .window(tumbling("1 min"))
        .agg(F.count("*").alias("orders"), F.sum("quantity").alias("quantity"))
        .sink_to(ParquetSink(output_dir))
    )


if __name__ == "__main__":
    output_dir = sys.argv[1] if len(sys.argv) > 1 else "out/http_ingest"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(2000)
    env.set_parallelism(1)
    build(env, output_dir)
    env.execute("http-ingest")
