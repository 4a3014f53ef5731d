"""The dashboard's pages at 50 jobs and 20 TaskManagers: how long each page's REST requests take.

A cluster in this process (tests/runtime/dispatcher/dashboard_scale.py): the real
ResourceManager and Dispatcher on a LocalRpcService, the real REST app served by uvicorn on
loopback, 20 real TaskExecutors (TestingTaskRuntime, no Spark) registered through
RegisterTaskManager, and 50 jobs (45 running or waiting for a slot, 5 finished). For each page,
its requests (``page_requests(as_served=True)``: the GETs its JavaScript makes on one refresh on
this cluster, including the fallbacks it takes where a path answers 404) are sent one
after the other over one keep-alive connection, as many rounds as asked; a page's time is the
sum of its requests' (the browser sends some of them at once, so this is an upper bound).

The peer, in the same invocation and the same app behind the same middleware: for every
request, a static JSON answer of the same size (``/bench-peer/{bytes}``, encoded once), and
FastAPI's own ``/openapi.json`` (cached after its first build). The ratio page / peer is what
the dashboard's answers cost over serving bytes; the 100 ms target is checked on the page's p95.
A request answered 404 (a path this cluster lacks: before issue 14's REST and metrics branches
merge) is counted apart and left out of the figures.

Usage: ``PYTHONPATH=src:. .venv/bin/python bench/dashboard_pages.py [--rounds 50]
[--jobs 50] [--taskmanagers 20]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.responses import Response
from tests.runtime.dispatcher.dashboard_scale import ScaledCluster, page_requests

TARGET_MS = 100.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def add_peer(cluster: ScaledCluster) -> None:
    """``GET /bench-peer/{size}``: ``size`` bytes of static JSON, encoded once per size."""
    encoded: dict[int, bytes] = {}

    async def peer(size: int) -> Response:
        if size not in encoded:
            encoded[size] = b'{"x":"' + b"a" * max(0, size - 8) + b'"}'
        return Response(encoded[size], media_type="application/json")

    cluster.app.add_api_route("/bench-peer/{size}", peer, include_in_schema=False)


def timed(cluster: ScaledCluster, path: str) -> tuple[float, int, int]:
    """Milliseconds, status and body size of one GET."""
    started = time.perf_counter()
    answer = cluster.client.get(path)
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, answer.status_code, len(answer.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--taskmanagers", type=int, default=20)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as work,
        ScaledCluster(Path(work), args.jobs, args.taskmanagers) as cluster,
    ):
        add_peer(cluster)
        pages = page_requests(cluster, as_served=True)
        sizes: dict[str, int] = {}
        missing: set[str] = set()
        for paths in pages.values():
            for path in paths:
                _, status, size = timed(cluster, path)  # warm-up; learns the sizes
                if status == 404:
                    missing.add(path)
                sizes[path] = size
        timed(cluster, "/openapi.json")
        print(f"{args.jobs} jobs, {args.taskmanagers} TaskManagers, {args.rounds} rounds a page")
        print(
            f"{'page':<16} {'requests':>8} {'bytes':>8} {'p50 ms':>8} {'p95 ms':>8} "
            f"{'peer p50':>9} {'peer p95':>9} {'ratio':>6}  target"
        )
        openapi = [timed(cluster, "/openapi.json")[0] for _ in range(args.rounds)]
        for page, paths in pages.items():
            served = [p for p in paths if p not in missing]
            totals, peers = [], []
            for _ in range(args.rounds):
                totals.append(sum(timed(cluster, p)[0] for p in served))
                peers.append(sum(timed(cluster, f"/bench-peer/{sizes[p]}")[0] for p in served))
            p50, p95 = statistics.median(totals), percentile(totals, 0.95)
            q50, q95 = statistics.median(peers), percentile(peers, 0.95)
            ratio = p50 / q50 if q50 else float("nan")
            verdict = "holds" if p95 < TARGET_MS else "MISSED"
            print(
                f"{page:<16} {len(served):>8} {sum(sizes[p] for p in served):>8} "
                f"{p50:>8.2f} {p95:>8.2f} {q50:>9.2f} {q95:>9.2f} {ratio:>6.2f}  {verdict}"
            )
        schema = len(cluster.client.get("/openapi.json").content)
        print(
            f"peer /openapi.json ({schema} bytes): p50 {statistics.median(openapi):.2f} ms, "
            f"p95 {percentile(openapi, 0.95):.2f} ms"
        )
        if missing:
            print(f"answered 404 (left out): {', '.join(sorted(missing))}")


if __name__ == "__main__":
    main()
