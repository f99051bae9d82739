"""`memora serve`'s signal handler takes no lock: a signal that arrives while the main thread
holds the lock of the event it waits on (inside `Event.wait`) still stops the stack, where
setting the event in the handler waited for the main thread forever (seen: a SIGINT left
`memora serve` running)."""

from __future__ import annotations

import subprocess
import sys

# The main thread holds the cancel event's lock when the signal comes, as `Event.wait` does
# between two waits; then it waits on the event as `memora serve` does.
_SCRIPT = """
import os, signal, threading
from services.cli.serve import _handle_signals

class Stack:
    cancel = threading.Event()
    def abort(self, grace):
        print("aborted", flush=True)

stack = Stack()
_handle_signals(stack)
with stack.cancel._cond:
    os.kill(os.getpid(), signal.SIGTERM)
print("cancelled" if stack.cancel.wait(10) else "not cancelled", flush=True)
os.kill(os.getpid(), signal.SIGINT)  # a second signal: abort and exit at once
threading.Event().wait(10)
print("still running", flush=True)
"""


def test_a_signal_while_the_main_thread_holds_the_event_lock_stops_the_stack() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=30
    )
    assert ran.stdout.split() == ["cancelled", "aborted"], ran.stdout + ran.stderr
    assert "killing…" in ran.stderr
    assert ran.returncode == 128 + 2  # SIGINT's
