"""HttpSource ingest: how fast the endpoint answers 202 with the records durable in its log.

Starts the HttpSource endpoint (``HttpIngestServer``, as the JobManager runs it) on a free
port with its log in a temporary directory on local disk, then posts ``--requests`` bodies of
``--batch`` JSON lines from ``--clients`` threads (one keep-alive connection each). Every 202
means one segment written, fsynced, renamed and the directory fsynced. Prints requests/s,
records/s and the answer latency (p50, p99) per setting.

Run: ``.venv/bin/python bench/http_ingest.py [--requests 400] [--clients 1 4] [--batch 1 100 1000]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

import httpx

from millrace.connectors.http_source_server import HttpIngestServer

TOKEN = "bench-token-of-the-http-source"


def _body(batch: int) -> bytes:
    line = b'{"product": "tea", "quantity": 2, "ordered_at": "2026-11-27T10:00:05Z"}\n'
    return line * batch


def run(
    server: HttpIngestServer, name: str, requests: int, clients: int, batch: int
) -> dict[str, float]:
    body = _body(batch)
    url = f"{server.url}/sources/{name}/records"
    latencies: list[float] = []
    per_client = requests // clients

    def client() -> None:
        mine = []
        with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            for _ in range(per_client):
                started = time.perf_counter()
                answer = http.post(url, content=body)
                mine.append(time.perf_counter() - started)
                assert answer.status_code == 202, answer.text
        latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    done = per_client * clients
    ordered = sorted(latencies)
    return {
        "requests_per_s": done / elapsed,
        "records_per_s": done * batch / elapsed,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="http-ingest-") as work:
        server = HttpIngestServer("127.0.0.1", 0, TOKEN, max_body_bytes=64 * 1024 * 1024)
        try:
            print("| clients | records/request | requests/s | records/s | p50 ms | p99 ms |")
            print("|---|---|---|---|---|---|")
            for batch in args.batch:
                for clients in args.clients:
                    name = f"bench-{batch}-{clients}"
                    server.log_for(name, f"{work}/{name}")
                    r = run(server, name, args.requests, clients, batch)
                    print(
                        f"| {clients} | {batch} | {r['requests_per_s']:.0f} | "
                        f"{r['records_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} |"
                    )
        finally:
            server.close()


if __name__ == "__main__":
    main()
