"""The opinions stage task (queue 'opinions'): stores the opinions a think formed.

Thin like every stage task: it takes the operation id and runs `Stage.OPINIONS` of the core
pipeline (memora.opinions does the work). Retries and failure recording are StageTask's.
tasks.py imports this module at its end, so a worker started with `-A services.workers.tasks`
registers `memora.opinions`.
"""

from __future__ import annotations

from memora.pipeline.stages import Stage
from services.workers.tasks import _stage_task

store_opinions = _stage_task(Stage.OPINIONS)
