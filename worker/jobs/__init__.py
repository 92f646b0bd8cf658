"""Questions as RQ jobs: the question model, queueing, the job lifecycle, sinks, workers and reaping."""
