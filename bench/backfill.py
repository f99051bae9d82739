"""Backfill benchmark: `memora backfill` of a generated archive through the real stack.

    python bench/backfill.py                      # 50,000 turns (about 10-15 min on 2 cores)
    python bench/backfill.py --turns 5000 --flat-sizes 5000,50000

1. Memory: the CLI's peak RSS reading archives of growing size (`--dry-run`: it streams and
   validates every message, posts nothing), to show it stays flat as the file grows.
2. Backfill: the whole stack (embedded PostgreSQL and Redis, API, query service, one worker
   per stage queue, beat) and the real CLI as a subprocess with `--wait`: turns/s accepted,
   time until everything is searchable, end-to-end turns/s, and the CLI's peak RSS.
3. Live traffic during the backfill: a small live document every few seconds; its POST ->
   searchable latency shows the backfill queues yielding to live work.
4. Searchable: a sample of archive turns is searched for through the query service.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import api_client  # bench/common.py

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from services.cli.stack import Stack

MEMORA = str(Path(sys.executable).parent / "memora")
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]
PLACES = ["Lisbon", "Kyoto", "Denver", "Nairobi", "Oslo", "Quebec", "Austin", "Porto"]
THINGS = [
    "a pottery class",
    "the marathon",
    "a job offer at Acme",
    "adopting a dog",
    "the new apartment",
    "guitar lessons",
    "the book club",
    "a camping trip",
    "the science fair",
    "a cooking course",
]
TEMPLATES = [
    "I told {other} about {thing} last week, it went really well.",
    "We are flying to {place} in May to visit {other}.",
    "{other} recommended {thing}; I signed up yesterday.",
    "Honestly {thing} was harder than I expected, but {other} helped a lot.",
    "Did you know {other} moved to {place}? We should plan {thing} there.",
    "My sister works in {place} now and loves {thing}.",
]


def write_archive(path: Path, turns: int, per_conversation: int = 20, agents: int = 100) -> Path:
    """Message-per-line JSONL; conversations one after another."""
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as handle:
        for t in range(turns):
            conv = t // per_conversation
            who = PEOPLE[(conv + t) % len(PEOPLE)]
            text = rng.choice(TEMPLATES).format(
                other=rng.choice(PEOPLE), thing=rng.choice(THINGS), place=rng.choice(PLACES)
            )
            day = 1 + conv % 28
            record = {
                "agent_id": f"user-{conv % agents}",
                "conversation_id": f"conv-{conv}",
                "speaker": who,
                "text": f"{text} (#{t})",
                "timestamp": f"2024-{1 + conv // 28 % 12:02d}-{day:02d}T{t % 24:02d}:00:00Z",
            }
            handle.write(json.dumps(record) + "\n")
    return path


def run_measured(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str, int]:
    """Run a command; (exit code, stdout, stderr, peak RSS in bytes over it and its children)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        ps = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            try:
                rss = ps.memory_info().rss + sum(
                    c.memory_info().rss for c in ps.children(recursive=True)
                )
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read().decode(), err.read().decode(), peak


def memory_flatness(work: Path, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for turns in sizes:
        archive = write_archive(work / f"flat-{turns}.jsonl", turns)
        started = time.perf_counter()
        code, out, err, peak = run_measured(
            [
                MEMORA,
                "backfill",
                str(archive),
                "--dry-run",
                "--no-progress",
                "--json",
                "--checkpoint",
                str(work / f"flat-{turns}.cp.json"),
            ]
        )
        assert code == 0, err
        summary = json.loads(out.splitlines()[-1])
        rows.append(
            {
                "turns": turns,
                "file_mb": round(archive.stat().st_size / 1e6, 1),
                "documents": summary["documents"],
                "seconds": round(time.perf_counter() - started, 1),
                "peak_rss_mb": round(peak / 1e6, 1),
            }
        )
        print(
            f"dry run {turns:>8,} turns ({rows[-1]['file_mb']} MB): "
            f"peak RSS {rows[-1]['peak_rss_mb']} MB, {rows[-1]['seconds']} s"
        )
        archive.unlink()
    return rows


class LiveProbe(threading.Thread):
    """Posts a small live document every `every` seconds and records POST -> completed."""

    def __init__(self, base: str, every: float) -> None:
        super().__init__(daemon=True)
        self.base, self.every = base, every
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with api_client(self.base, timeout=60) as memora:
            n = 0
            while not self.stop.wait(self.every):
                n += 1
                items = [
                    {
                        "content": f"Live note {n}-{i}: Maya met Lena in Pittsburgh.",
                        "speaker": "Maya",
                    }
                    for i in range(3)
                ]
                sent = time.monotonic()
                op = memora.store_batch("live-probe", items, f"live-{n}").operation_id
                while not self.stop.is_set():
                    if memora.operation(op).finished:
                        self.latencies.append(time.monotonic() - sent)
                        break
                    time.sleep(0.1)


def searchable_check(query_base: str, archive: Path, samples: int = 20) -> float:
    """Fraction of sampled turns found in the top 10 when searching for their own text."""
    lines = archive.read_text().splitlines()
    rng = random.Random(11)
    hits = 0
    with api_client(query_base, timeout=60) as memora:
        for line in rng.sample(lines, samples):
            record = json.loads(line)
            found = memora.search(record["agent_id"], record["text"], top_k=10)
            texts = [hit.text for hit in found.results]
            hits += any(record["text"] in t for t in texts)
    return hits / samples


def reconciler_requeued(log: Path) -> int:
    """Operations the reconciler re-enqueued as stuck (its task returns how many)."""
    total = 0
    for line in log.read_text(errors="replace").splitlines():
        if "memora.reconcile[" in line and "succeeded" in line:
            total += int(line.rsplit(":", 1)[-1].strip() or 0)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=50_000)
    parser.add_argument(
        "--flat-sizes",
        default="5000,50000,500000",
        help="archive sizes (turns) for the dry-run memory measurement",
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--live-every", type=float, default=10.0)
    parser.add_argument("--max-backlog", type=int, help="the CLI's --max-backlog (its default)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/backfill.json"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memora-bench-backfill-"))
    flat = memory_flatness(work, [int(s) for s in args.flat_sizes.split(",") if s])

    archive = write_archive(work / "archive.jsonl", args.turns)
    settings = Settings(data_dir=work / "stack", port=free_port(), query_port=free_port())
    with Stack(settings, log_dir=settings.data_dir / "logs") as stack:
        stack.wait_ready()
        base = f"http://{settings.host}:{settings.port}"
        probe = LiveProbe(base, args.live_every)
        probe.start()
        started = time.perf_counter()
        code, out, err, peak = run_measured(
            [
                MEMORA,
                "backfill",
                str(archive),
                "--api",
                base,
                "--wait",
                "--no-progress",
                "--json",
                "--concurrency",
                str(args.concurrency),
                "--checkpoint",
                str(work / "archive.cp.json"),
                *(["--max-backlog", str(args.max_backlog)] if args.max_backlog is not None else []),
            ]
        )
        total = time.perf_counter() - started
        probe.stop.set()
        probe.join(timeout=60)
        assert code == 0, err[-3000:]
        summary = json.loads(out.splitlines()[-1])
        found = searchable_check(f"http://{settings.host}:{settings.query_port}", archive)
        second_code, second_out, second_err, _ = run_measured(
            [
                MEMORA,
                "backfill",
                str(archive),
                "--api",
                base,
                "--no-progress",
                "--json",
                "--restart",
                "--concurrency",
                str(args.concurrency),
                "--checkpoint",
                str(work / "archive.cp.json"),
            ]
        )
        assert second_code == 0, second_err[-3000:]
        second = json.loads(second_out.splitlines()[-1])
        reconciled = reconciler_requeued(settings.data_dir / "logs" / "worker-opinions.log")

    live = sorted(probe.latencies)
    result = {
        "when": datetime.now(UTC).isoformat(),
        "turns": args.turns,
        "file_mb": round(archive.stat().st_size / 1e6, 1),
        "documents": summary["documents"],
        "accept_seconds": round(summary["seconds"], 1),
        "accepted_turns_per_s": round(summary["items_per_second"], 1),
        "searchable_after_s": round(summary["seconds"] + summary["searchable_seconds"], 1),
        "end_to_end_turns_per_s": round(
            args.turns / (summary["seconds"] + summary["searchable_seconds"]), 1
        ),
        "wall_seconds": round(total, 1),
        "failed_documents": summary["failed"],
        "failed_operations": summary["failed_operations"],
        "cli_peak_rss_mb": round(peak / 1e6, 1),
        "search_found_fraction": found,
        "second_run_outcomes": second["outcomes"],
        "second_run_seconds": round(second["seconds"], 1),
        "live_probe_latency_s": {
            "count": len(live),
            "p50": round(statistics.median(live), 2) if live else None,
            "max": round(live[-1], 2) if live else None,
        },
        "dry_run_memory": flat,
        "max_backlog": args.max_backlog,
        "reconciler_requeued": reconciled,
        "cpus": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
