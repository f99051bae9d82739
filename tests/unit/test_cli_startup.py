"""`memora worker` sets PROMETHEUS_MULTIPROC_DIR and its settings before prometheus-client and
the Celery app are imported, so loading the `memora` command must import neither."""

from __future__ import annotations

import subprocess
import sys


def test_loading_the_cli_imports_neither_prometheus_nor_the_celery_app() -> None:
    code = (
        "import sys, services.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'prometheus_client' "
        "or m == 'services.workers.celery_app'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
