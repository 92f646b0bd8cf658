"""Old RQ path: refresh jobs queued before worker/ had subpackages name
`worker.admin.run_refresh` (and the callback `worker.admin.on_refresh_failed`); RQ stores those
dotted paths in Redis. Kept so such jobs still run after an upgrade. The code is in
worker/jobs/admin.py."""

from worker.jobs.admin import on_refresh_failed, run_refresh

__all__ = ["on_refresh_failed", "run_refresh"]
