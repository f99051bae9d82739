"""Writes memora_client/_async.py and _async_base.py from _sync.py and _sync_base.py: one
source for both clients.

python clients/python/scripts/generate_async.py          # rewrite them
python clients/python/scripts/generate_async.py --check  # exit 1 if one is out of date
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memora_client"

# source -> generated, in memora_client/
FILES = {"_sync_base.py": "_async_base.py", "_sync.py": "_async.py"}
# (old, new), applied to every source: each must occur in one, so a rename there cannot
# silently break this.
REPLACEMENTS = [
    (
        "Edit the sync files (_sync.py, _sync_base.py), then run\n"
        "clients/python/scripts/generate_async.py: it writes the async ones.",
        "Generated from _sync.py and _sync_base.py by clients/python/scripts/generate_async.py:\n"
        "do not edit.",
    ),
    ("The synchronous client", "The asynchronous client"),
    ("(its connection: _sync_base.py)", "(its connection: _async_base.py)"),
    ("(the API's methods: _sync.py)", "(the API's methods: _async.py)"),
    ("memora_client._sync_base import", "memora_client._async_base import"),
    ("import time\n", "import asyncio\n"),
    ("MemoraClient", "AsyncMemoraClient"),
    ("        with AsyncMemoraClient(", "        async with AsyncMemoraClient("),
    ("memora.wait_for(", "await memora.wait_for("),
    ("= memora.", "= await memora."),
    ("as a context manager, or call `close()`", "as an async context manager, or await `close()`"),
    ("httpx.Client(", "httpx.AsyncClient("),
    ("http_client: httpx.Client |", "http_client: httpx.AsyncClient |"),
    ("httpx.BaseTransport", "httpx.AsyncBaseTransport"),
    ("tenacity.Retrying(", "tenacity.AsyncRetrying("),
    ("def __enter__", "def __aenter__"),
    ("def __exit__", "def __aexit__"),
    ("self.close()", "await self.close()"),
    ("            self._http.close()", "            await self._http.aclose()"),
    ("response = self._http.request(", "response = await self._http.request("),
    ("= retrying(self._send", "= await retrying(self._send"),
    ("return self._request(", "return await self._request("),
    ("op = self.operation(", "op = await self.operation("),
    ("time.sleep(", "await asyncio.sleep("),
    ("with self._http.stream(", "async with self._http.stream("),
    ("response.read()", "await response.aread()"),
    ("for chunk in response.iter_bytes()", "async for chunk in response.aiter_bytes()"),
    ("response = self._http.post(", "response = await self._http.post("),
    ("t.file_chunks(", "t.afile_chunks("),
]
METHOD = re.compile(r"^    def (?!__init__\b)", re.MULTILINE)


def generate(sources: dict[str, str]) -> dict[str, str]:
    """The generated files' texts, by name, from the sources' texts, by name."""
    texts = dict(sources)
    for old, new in REPLACEMENTS:
        if not any(old in text for text in texts.values()):
            raise SystemExit(f"generate_async: {old!r} is in none of {', '.join(FILES)}")
        texts = {name: text.replace(old, new) for name, text in texts.items()}
    return {
        FILES[name]: _formatted(METHOD.sub("    async def ", text), FILES[name])
        for name, text in texts.items()
    }


def _formatted(source: str, target_name: str) -> str:
    """As `ruff format` leaves it (the repository's settings), so lint passes on the output."""
    beside = Path(sys.executable).parent / "ruff"
    ruff = str(beside) if beside.exists() else shutil.which("ruff")
    if ruff is None:
        raise SystemExit("generate_async: ruff is needed (pip install ruff)")
    target = PACKAGE / target_name
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", str(target), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE,
    )
    return done.stdout


def main() -> int:
    generated = generate({name: (PACKAGE / name).read_text() for name in FILES})
    if "--check" in sys.argv:
        stale = [name for name, text in generated.items() if _current(name) != text]
        for name in stale:
            print(f"memora_client/{name} is out of date: run scripts/generate_async.py")
        return 1 if stale else 0
    for name, text in generated.items():
        (PACKAGE / name).write_text(text)
    return 0


def _current(name: str) -> str | None:
    path = PACKAGE / name
    return path.read_text() if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main())
