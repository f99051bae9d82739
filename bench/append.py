"""Live conversations (issue 24): the append route against the conversation's length, and many
conversations streaming at once against posting the same messages as whole documents.

    python bench/append.py --locomo ../shared/locomo/locomo_dev.json
    python bench/append.py --quick            # a smoke test: small sizes, about two minutes
    python bench/append.py --parts bc --paced-seconds 30     # the four targets of issue 60

a. One conversation of --long-messages LoCoMo turns, appended 1–2 messages at a time
   (`POST /api/agents/{a}/conversations/{c}/messages`), each append waited to completion as a live
   chat would. Reported: the median POST → operation completed of the appends that start in the
   --early and --late windows (message positions), and late / early (target ≤ 1.2).
b. --conversations conversations of --per-conversation messages on --agents agents, sent by
   --clients threads, each owning some conversations and appending 1–2 messages to each in turn
   without waiting for the pipeline. Sustained messages/s (first POST to the last operation's
   end) against the same messages posted as whole documents (one `POST /api/memories/batch` per
   conversation) on the same stack (target ≥ 0.8 ×), and the stack's CPU seconds per message in
   each (the pipeline is CPU-bound: their ratio is the throughput ratio on a machine with nothing
   else running, even when other work shares this one); then appends paced at --paced-fraction of
   the append throughput for --paced-seconds: POST → searchable p50/p95 (`links` done: memories
   found by every retriever, as bench/ingest.py; target p95 < 1 s) and POST → completed (the
   conversation index too), with a sample of messages looked up by conversation search.

c. Whole conversations against the bare embedding of their texts (the model alone, one thread,
   in this process): the LoCoMo sessions posted one after another by one client (target
   ≥ 0.6 ×), and --clients-whole clients posting --conversations conversations of 40 turns at
   once (target ≥ 0.75 ×).

Appends coalesce (MEMORA_APPEND_COALESCE_MESSAGES, MEMORA_APPEND_COALESCE_MS): the appends of
one conversation that arrive before its pending operation starts share it, so parts b and c
count POSTs and operations apart. Every phase has its own agents. 429 and 503 answers are
retried after their Retry-After.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memora_client import MemoraClient, RateLimitedError, ServiceUnavailableError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from common import BenchStack, api_client, embedded_stack, seconds_after_post
from ingest import (
    Session,
    bare_embedding_rate,
    generated_sessions,
    locomo_sessions,
    pct,
    post_all,
    wait_done,
)

from memora.basics.stages import INGEST_STAGES

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo_dev.json"
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
RETRIES = 8
Posted = tuple[str, float, int]  # operation id, epoch seconds of the POST, messages


@dataclass
class Conversation:
    agent_id: str
    conversation_id: str
    messages: list[dict[str, Any]]
    appends: list[list[dict[str, Any]]] = field(default_factory=list)  # 1–2 messages each


@dataclass
class Client:
    """One memora_client (without retries of its own) shared by the threads; counts what it
    had to retry."""

    memora: MemoraClient
    retried: dict[int, int] = field(default_factory=dict)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST until accepted; a 429 or 503 with Retry-After is waited out and sent again (safe:
        message ids and document ids make the retry idempotent)."""
        for _ in range(RETRIES):
            try:
                answer: dict[str, Any] = self.memora.request("POST", path, body)
            except (RateLimitedError, ServiceUnavailableError) as exc:
                if exc.retry_after is None:
                    raise
                self.retried[exc.status] = self.retried.get(exc.status, 0) + 1
                time.sleep(min(exc.retry_after, 10.0))
                continue
            return answer
        raise RuntimeError(f"POST {path}: still refused after {RETRIES} attempts")

    def append(self, c: Conversation, messages: list[dict[str, Any]]) -> dict[str, Any]:
        path = f"/api/agents/{c.agent_id}/conversations/{c.conversation_id}/messages"
        return self.post(path, {"messages": messages})

    def whole(self, c: Conversation) -> dict[str, Any]:
        body = {"agent_id": c.agent_id, "document_id": c.conversation_id, "items": c.messages}
        return self.post("/api/memories/batch", body)


# ---------------------------------------------------------------------------- data
def turns(sessions: list[Session]) -> list[dict[str, Any]]:
    """Every turn as a chat message without id or time: in each session the first speaker is
    the `user`, the other the `assistant`."""
    out = []
    for s in sessions:
        first = s.items[0].get("speaker")
        for item in s.items:
            out.append(
                {
                    "role": "user" if item.get("speaker") == first else "assistant",
                    "speaker": item.get("speaker"),
                    "content": item["content"],
                    "metadata": item.get("metadata", {}),
                }
            )
    return out


def conversation(
    agent_id: str,
    conversation_id: str,
    source: Iterator[dict[str, Any]],
    n: int,
    rng: random.Random,
) -> Conversation:
    """`n` messages from `source`, ids m0000…, one minute apart (each append lands at the end),
    cut into appends of 1 or 2 messages."""
    start = START + timedelta(days=rng.randrange(300))
    messages = [
        {"message_id": f"m{i:04d}", **t, "event_date": (start + timedelta(minutes=i)).isoformat()}
        for i, t in zip(range(n), source, strict=False)
    ]
    c = Conversation(agent_id, conversation_id, messages)
    i = 0
    while i < len(messages):
        step = rng.choice((1, 2))
        c.appends.append(messages[i : i + step])
        i += step
    return c


def many(
    prefix: str, source: list[dict[str, Any]], count: int, per: int, agents: int, seed: int
) -> list[Conversation]:
    """`count` conversations of `per` messages on `agents` agents, the turns taken in turn."""
    rng = random.Random(seed)
    stream = itertools.cycle(source)
    return [
        conversation(f"{prefix}-a{k % agents}", f"c{k:04d}", stream, per, rng) for k in range(count)
    ]


# ---------------------------------------------------------------------------- part a
def cost_by_length(
    client: Client, source: list[dict[str, Any]], n: int, windows: dict[str, tuple[int, int]]
) -> dict[str, Any]:
    """Appends to one conversation, each waited to completion; the median by window."""
    c = conversation(
        f"bench-long-{uuid.uuid4().hex[:6]}", "long", iter(source), n, random.Random(1)
    )
    done: list[tuple[int, dict[str, Any], float]] = []  # first message position, operation, POST
    position = 0
    for messages in c.appends:
        sent = time.time()
        answer = client.append(c, messages)
        if answer["operation_id"]:
            [op] = wait_done(client.memora, [(answer["operation_id"], sent, len(messages))], 600)
            done.append((position, op, sent))
        position += len(messages)
    failed = sum(1 for _, op, _ in done if op["status"] != "completed")
    out: dict[str, Any] = {"messages": len(c.messages), "appends": len(done), "failed": failed}
    for name, (lo, hi) in windows.items():
        ops = [op for p, op, _ in done if lo <= p < hi]
        posts = [(op["id"], at) for p, op, at in done if lo <= p < hi]
        lat = seconds_after_post(ops, posts)
        out[name] = {
            "window": [lo, hi],
            "appends": len(lat),
            "completed_median_s": _median(lat),
            "searchable_median_s": _median(seconds_after_post(ops, posts, "links")),
            "stage_ms": stage_means(ops),
        }
    # The trend over the whole conversation, to tell growth from noise in the two windows.
    out["completed_median_s_by_100"] = {
        f"{lo}-{lo + 100}": _median(
            seconds_after_post(
                [op for p, op, _ in done if lo <= p < lo + 100],
                [(op["id"], at) for p, op, at in done if lo <= p < lo + 100],
            )
        )
        for lo in range(0, position, 100)
    }
    early, late = (out[w]["completed_median_s"] for w in windows)
    out["ratio"] = late / early if early and late else None
    return out


def stage_means(ops: list[dict[str, Any]]) -> dict[str, float]:
    """Mean milliseconds each ingest stage took per operation."""
    means = {}
    for stage in INGEST_STAGES:
        spans = [
            datetime.fromisoformat(s["finished_at"]).timestamp()
            - datetime.fromisoformat(s["started_at"]).timestamp()
            for op in ops
            if (s := op["stages"].get(stage)) and s.get("finished_at") and s.get("started_at")
        ]
        if spans:
            means[stage.value] = round(1000 * statistics.mean(spans), 1)
    return means


# ---------------------------------------------------------------------------- part b
def stream(
    client: Client, conversations: list[Conversation], clients: int, rate: float | None
) -> list[Posted]:
    """`clients` threads, each owning every `clients`-th conversation and appending to each in
    turn (one append per conversation per round), paced at `rate` messages/s in all: each
    thread at its share of the conversations, so that the whole run keeps the rate."""

    def run(share: list[Conversation]) -> list[Posted]:
        posted: list[Posted] = []
        t0, sent_messages = time.monotonic(), 0
        mine = rate * len(share) / len(conversations) if rate else 0.0
        for r in range(max(len(c.appends) for c in share)):
            for c in share:
                if r >= len(c.appends):
                    continue
                if mine and (wait := t0 + sent_messages / mine - time.monotonic()) > 0:
                    time.sleep(wait)
                sent = time.time()
                answer = client.append(c, c.appends[r])
                if answer["operation_id"]:
                    posted.append((answer["operation_id"], sent, len(c.appends[r])))
                sent_messages += len(c.appends[r])
        return posted

    shares = [conversations[i::clients] for i in range(clients) if conversations[i::clients]]
    with ThreadPoolExecutor(len(shares)) as pool:
        return sorted((p for ps in pool.map(run, shares) for p in ps), key=lambda p: p[1])


def post_whole(client: Client, conversations: list[Conversation], clients: int) -> list[Posted]:
    """Each conversation as one document, `clients` POSTs at a time."""

    def one(c: Conversation) -> Posted:
        sent = time.time()
        return client.whole(c)["operation_id"], sent, len(c.messages)

    with ThreadPoolExecutor(clients) as pool:
        return sorted(pool.map(one, conversations), key=lambda p: p[1])


def throughput(client: Client, posted: list[Posted]) -> dict[str, Any]:
    """Messages per second from the first POST to the end of the last operation."""
    ops = wait_done(client.memora, posted)
    ends = [datetime.fromisoformat(op["finished_at"]).timestamp() for op in ops]
    messages = sum(n for _, _, n in posted)
    span = max(ends) - posted[0][1]
    distinct = list({op["id"]: op for op in ops}.values())
    return {
        "messages": messages,
        "posts": len(posted),
        "operations": len(distinct),
        "failed": sum(1 for op in distinct if op["status"] != "completed"),
        "seconds": round(span, 2),
        "messages_per_s": messages / span,
        "stage_ms": stage_means(distinct),
    }


def stored_in_order(client: Client, conversations: list[Conversation]) -> int:
    """Conversations whose document holds exactly their messages, in order."""
    ok = 0
    for c in conversations:
        document = client.memora.request(
            "GET", f"/api/agents/{c.agent_id}/documents/{c.conversation_id}"
        )
        ids = [item.get("message_id") for item in document.get("items", [])]
        ok += ids == [m["message_id"] for m in c.messages]
    return ok


def found_by_search(client: Client, conversations: list[Conversation], sample: int) -> int:
    """Of `sample` messages, how many conversation search finds by their text."""
    rng = random.Random(2)
    picks = [(c, rng.choice(c.messages)) for c in rng.sample(conversations, sample)]
    found = 0
    for c, m in picks:
        body = {
            "agent_id": c.agent_id,
            "query": m["content"],
            "document_id": c.conversation_id,
            "limit": 20,
        }
        hits = client.post("/api/conversation_search", body)["results"]
        found += any(m["message_id"] in h["message_ids"] for h in hits)
    return found


def streaming(
    client: Client, stack: BenchStack, source: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    shape = (source, args.conversations, args.per_conversation, args.agents)
    whole = many(f"bench-whole-{tag}", *shape, seed=3)
    live = many(f"bench-live-{tag}", *shape, seed=3)  # the same messages, in appends
    out: dict[str, Any] = {"clients": args.clients, "conversations": len(live)}
    for name, send in (
        ("whole_documents", lambda: post_whole(client, whole, args.clients)),
        ("append", lambda: stream(client, live, args.clients, None)),
    ):
        cpu = stack.cpu_seconds()
        out[name] = throughput(client, send())
        out[name]["cpu_s_per_message"] = (stack.cpu_seconds() - cpu) / out[name]["messages"]
    out["append"]["stored_in_order"] = stored_in_order(client, live)
    whole_, append_ = out["whole_documents"], out["append"]
    out["ratio"] = append_["messages_per_s"] / whole_["messages_per_s"]
    # The stack's CPU per message, whole / append: the throughput ratio on a machine with
    # nothing else running (the pipeline is CPU-bound), whatever else runs here.
    out["cpu_ratio"] = whole_["cpu_s_per_message"] / append_["cpu_s_per_message"]

    rate = args.paced_rate or args.paced_fraction * out["append"]["messages_per_s"]
    needed = max(1, round(rate * args.paced_seconds / args.per_conversation))
    paced = many(f"bench-paced-{tag}", source, needed, args.per_conversation, args.agents, 4)
    cpu, t0 = stack.cpu_seconds(), time.monotonic()
    posted = stream(client, paced, min(args.clients, len(paced)), rate)
    seconds = time.monotonic() - t0
    ops = wait_done(client.memora, posted)
    messages = sum(n for _, _, n in posted)
    posts = [(o, at) for o, at, _ in posted]
    searchable = seconds_after_post(ops, posts, "links")
    completed = seconds_after_post(ops, posts)
    sample = min(20, len(paced))
    out["paced"] = {
        "target_messages_per_s": rate,
        "messages_per_s": messages / seconds,
        "appends": len(posted),
        "operations": len({op["id"] for op in ops}),
        "cpu_s_per_message": (stack.cpu_seconds() - cpu) / messages,
        "failed": len(posted) - sum(1 for op in ops if op["status"] == "completed"),
        "searchable_p50_s": pct(searchable, 50),
        "searchable_p95_s": pct(searchable, 95),
        "completed_p50_s": pct(completed, 50),
        "completed_p95_s": pct(completed, 95),
        "found_by_search": [found_by_search(client, paced, sample), sample],
    }
    out["retried"] = client.retried
    return out


# ---------------------------------------------------------------------------- part c
def against_bare(
    client: Client, sessions: list[Session], source: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    """Whole posts' turns/s over the model's own turns/s on the same texts (one thread)."""
    texts = [f"{t['speaker']}: {t['content']}" for t in source]
    bare = bare_embedding_rate(texts, 1)
    agent = f"bench-whole1-{uuid.uuid4().hex[:6]}"
    one = throughput(client, post_all(client.memora, agent, sessions, rate=None))
    tag = uuid.uuid4().hex[:6]
    forty = many(f"bench-whole40-{tag}", source, args.conversations, 40, args.agents, seed=5)
    many_clients = throughput(client, post_whole(client, forty, args.clients_whole))
    return {
        "bare_turns_per_s": bare,
        "one_client": one,
        "one_client_ratio": one["messages_per_s"] / bare,
        "clients": args.clients_whole,
        "many_clients": many_clients,
        "many_clients_ratio": many_clients["messages_per_s"] / bare,
    }


# ---------------------------------------------------------------------------- report
def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []
    if a := results.get("length"):
        early, late = a["early"], a["late"]
        for name, w in (("early", early), ("late", late)):
            rows.append(
                (
                    f"a. append → completed, median, messages {w['window'][0]}–{w['window'][1]}",
                    f"{_s(w['completed_median_s'])} ({w['appends']} appends; searchable "
                    f"{_s(w['searchable_median_s'])})",
                    "",
                )
            )
            rows.append((f"   stage ms, {name}", _stages(w["stage_ms"]), ""))
        rows.append(("a. late / early", _x(a["ratio"]), "≤ 1.2"))
        by_100 = a["completed_median_s_by_100"]
        rows.append(
            (
                "a. median by 100 messages",
                " / ".join(f"{k} {_s(v)}" for k, v in by_100.items()),
                "",
            )
        )
        rows.append(("a. appends, failed", f"{a['appends']}, {a['failed']}", "0 failed"))
    if b := results.get("streaming"):
        w, ap, p = b["whole_documents"], b["append"], b["paced"]
        rows += [
            (
                f"b. whole documents ({b['conversations']} POSTs, {b['clients']} clients)",
                f"{w['messages_per_s']:.1f} messages/s ({w['messages']} in {w['seconds']} s)",
                "",
            ),
            ("   stage ms per document", _stages(w["stage_ms"]), ""),
            (
                f"b. appends of 1–2 ({ap['posts']} POSTs, {ap['operations']} operations, "
                f"{b['clients']} clients)",
                f"{ap['messages_per_s']:.1f} messages/s ({ap['messages']} in {ap['seconds']} s)",
                "",
            ),
            ("   stage ms per append", _stages(ap["stage_ms"]), ""),
            ("b. append / whole, messages/s", _x(b["ratio"]), "≥ 0.8"),
            (
                "b. stack CPU s per message, whole / append",
                f"{w['cpu_s_per_message']:.3f} / {ap['cpu_s_per_message']:.3f} = "
                f"{_x(b['cpu_ratio'])}",
                "",
            ),
            (
                "b. stored in order; failed operations",
                f"{ap['stored_in_order']}/{b['conversations']}; {w['failed'] + ap['failed']}",
                "all; 0",
            ),
            (
                f"b. paced at {p['messages_per_s']:.1f} messages/s: POST → searchable p50 / p95",
                f"{_s(p['searchable_p50_s'])} / {_s(p['searchable_p95_s'])}",
                "p95 < 1 s",
            ),
            (
                "   POST → completed (conversation index) p50 / p95",
                f"{_s(p['completed_p50_s'])} / {_s(p['completed_p95_s'])}",
                "",
            ),
            (
                "   appends / operations; stack CPU s per message",
                f"{p['appends']} / {p['operations']}; {p['cpu_s_per_message']:.3f}",
                "",
            ),
            ("   found by conversation search", "{}/{}".format(*p["found_by_search"]), "all"),
            ("   429/503 retried", str(b["retried"] or 0), ""),
        ]
    if c := results.get("whole"):
        one, many_ = c["one_client"], c["many_clients"]
        rows += [
            ("c. bare embedding, 1 thread", f"{c['bare_turns_per_s']:.1f} turns/s", ""),
            (
                f"c. whole sessions, 1 client ({one['posts']} POSTs): turns/s, / bare",
                f"{one['messages_per_s']:.1f}, {_x(c['one_client_ratio'])}",
                "≥ 0.6",
            ),
            (
                f"c. 40-turn conversations, {c['clients']} clients ({many_.get('posts')} POSTs)",
                f"{many_['messages_per_s']:.1f}, {_x(c['many_clients_ratio'])}",
                "≥ 0.75",
            ),
            ("   failed operations", str(one["failed"] + many_["failed"]), "0"),
        ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{r[0]:<{width}}  {r[1]}" + (f"   [{r[2]}]" if r[2] else "") for r in rows)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} ×"


def _stages(means: dict[str, float]) -> str:
    return " / ".join(f"{k} {v:.0f}" for k, v in means.items())


def _window(text: str) -> tuple[int, int]:
    lo, hi = text.split(":")
    return int(lo), int(hi)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo JSON")
    parser.add_argument("--parts", default="abc", help="any of a, b, c")
    parser.add_argument("--long-messages", type=int, default=520)
    parser.add_argument("--early", type=_window, default=(10, 30), help="positions lo:hi")
    parser.add_argument("--late", type=_window, default=(490, 510), help="positions lo:hi")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--per-conversation", type=int, default=60)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--clients-whole", type=int, default=8, help="part c's clients")
    parser.add_argument("--paced-fraction", type=float, default=0.5, help="of append msg/s")
    parser.add_argument("--paced-seconds", type=float, default=60.0)
    parser.add_argument("--paced-rate", type=float, help="messages/s instead of the fraction")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.long_messages, args.early, args.late = 40, (5, 15), (25, 35)
        args.conversations, args.per_conversation, args.agents, args.clients = 20, 4, 4, 2
        args.clients_whole = 2
        args.paced_seconds = 10.0
    sessions = locomo_sessions(args.locomo) if args.locomo.exists() else generated_sessions(3000)
    source = turns(sessions)
    if len(source) < args.long_messages:
        raise SystemExit(f"{len(source)} turns, fewer than --long-messages {args.long_messages}")

    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "source": str(args.locomo) if args.locomo.exists() else "generated",
        "load_average_before": os.getloadavg(),
    }
    windows = {"early": args.early, "late": args.late}
    with (
        embedded_stack(with_query="b" in args.parts) as stack,
        api_client(stack.url) as memora,
    ):
        client = Client(memora)
        if "a" in args.parts:
            results["length"] = cost_by_length(client, source, args.long_messages, windows)
        if "b" in args.parts:
            results["streaming"] = streaming(client, stack, source, args)
        if "c" in args.parts:
            results["whole"] = against_bare(client, sessions, source, args)
    results["load_average_after"] = os.getloadavg()
    print(table(results))
    print(
        "load average (1, 5, 15 min) before / after: {} / {}".format(
            *(
                " ".join(f"{x:.1f}" for x in results[k])
                for k in ("load_average_before", "load_average_after")
            )
        )
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
