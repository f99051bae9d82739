"""Writes memora_client/_async.py from memora_client/_sync.py: one source for both clients.

python clients/python/scripts/generate_async.py          # rewrite _async.py
python clients/python/scripts/generate_async.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memora_client"

# (old, new): each must occur in _sync.py, so a rename there cannot silently break this.
REPLACEMENTS = [
    (
        '"""The synchronous client. memora_client/_async.py is generated from this file\n'
        '(clients/python/scripts/generate_async.py): edit this one, then run the script."""',
        '"""The asynchronous client, generated from memora_client/_sync.py by\n'
        'clients/python/scripts/generate_async.py: do not edit."""',
    ),
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
    ("c.file_chunks(", "c.afile_chunks("),
]
METHOD = re.compile(r"^    def (?!__init__\b)", re.MULTILINE)


def generate(source: str) -> str:
    for old, new in REPLACEMENTS:
        if old not in source:
            raise SystemExit(f"generate_async: {old!r} is not in _sync.py")
        source = source.replace(old, new)
    return _formatted(METHOD.sub("    async def ", source))


def _formatted(source: str) -> str:
    """As `ruff format` leaves it (the repository's settings), so lint passes on the output."""
    beside = Path(sys.executable).parent / "ruff"
    ruff = str(beside) if beside.exists() else shutil.which("ruff")
    if ruff is None:
        raise SystemExit("generate_async: ruff is needed (pip install ruff)")
    target = PACKAGE / "_async.py"
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
    target = PACKAGE / "_async.py"
    text = generate((PACKAGE / "_sync.py").read_text())
    if "--check" in sys.argv:
        if target.read_text() != text:
            print("memora_client/_async.py is out of date: run scripts/generate_async.py")
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
