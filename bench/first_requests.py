"""What a script meets right after `memora serve` says ready (issue 25): it starts `memora serve`
on a fresh data folder, waits for the write API's /health/ready as the README says, and then at
once searches, stores a batch and waits for its operation, as a new user's script would.

Reports the time to ready, the first search's status (and how many 503s the search saw while
retrying for up to 30 s), and the first batch's POST -> completed time. Run it on a quiet
machine:

    .venv/bin/python bench/first_requests.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import api_client, wait_ready  # bench/common.py

from memora.infra.embedded import free_port
from memora_client import APIError

BATCH = {
    "agent_id": "first-hour",
    "items": [
        {"content": "Maya: First week at Northwind done, the team is great."},
        {"content": "Maya is planning a trip to Kyoto in April."},
    ],
}


def _status(call: Callable[[], object]) -> int:
    try:
        call()
    except APIError as exc:
        return exc.status
    return 200


def one_run() -> dict[str, float]:
    data = Path(tempfile.mkdtemp(prefix="memora-bench-first-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_")}
    env.update(MEMORA_DATA_DIR=str(data), MEMORA_PORT=str(port), HF_HUB_OFFLINE="1")
    memora = str(Path(sys.executable).parent / "memora")
    proc = subprocess.Popen(
        [memora, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        wait_ready(base, 300)
        to_ready = time.monotonic() - started
        client = api_client(base, timeout=30)
        refused, t0 = 0, time.monotonic()
        while True:
            status = _status(lambda: client.search("x", "q"))
            if status != 503 or time.monotonic() - t0 > 30:
                break
            refused += 1
            time.sleep(0.2)
        search_wait = time.monotonic() - t0
        t1 = time.monotonic()
        op = client.store_batch(BATCH["agent_id"], BATCH["items"]).operation_id
        while client.operation(op).status not in ("completed", "failed"):
            time.sleep(0.05)
        first_ingest = time.monotonic() - t1
        client.close()
        return {
            "to_ready_s": to_ready,
            "search_503s": refused,
            "search_ok_after_s": search_wait,
            "first_ingest_s": first_ingest,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    for run in runs:
        print({k: round(v, 2) for k, v in run.items()})
    for key in runs[0]:
        print(f"{key}: median {statistics.median(r[key] for r in runs):.2f}")


if __name__ == "__main__":
    main()
