"""The model settings each worker process answers with, as it reports them, for operators.

Every worker may run with its own environment (another machine, another `.env`), so what the
console or `codebot status` was started with says nothing of them. Each worker writes its own
into its RQ worker hash (field MODEL_FIELD), in the same write as RQ's own fields
(CodebotWorker.serialize, worker/jobs/reaper.py), so it is never listed without them, and they
are gone with it; the console's System page lists them. The endpoint is in display form (no
user, password or query string: `display_url`), and no key is ever written.
"""

from __future__ import annotations

import json
from typing import Any

from redis import Redis
from rq.worker.base import BaseWorker

from config.settings import Settings
from worker.agent.endpoint_memory import base_url_of, display_url
from worker.ops.json_list import json_field

MODEL_FIELD = "codebot_model"


def model_settings(settings: Settings) -> dict[str, Any]:
    """What a worker answers with: model, endpoint (display form), bounds. Never the key."""
    return {
        "model": settings.model,
        "endpoint": display_url(base_url_of(settings)),
        "max_tokens": settings.model_max_tokens,  # 0: chosen per endpoint (docs/configuration.md)
        "model_timeout_seconds": settings.model_timeout_seconds,
        "deadline_seconds": settings.question_deadline_seconds,
    }


def model_field(facts: dict[str, Any] | None) -> dict[str, str]:
    """The worker hash's field holding `facts` (none when there are none to report)."""
    return {MODEL_FIELD: json.dumps(facts)} if facts is not None else {}


def reported_model_settings(redis: Redis, worker: BaseWorker) -> dict[str, Any] | None:
    """What `worker` reported (None: a worker of a release that does not report them)."""
    return json_field(redis, worker.key, MODEL_FIELD)
