"""The channel `rq` commands reach a worker on (stop-job, kill-horse, shutdown), read on a
thread of the worker's own, and a stop of that thread that never waits out a read.

RQ reads the channel on redis-py's PubSubWorkerThread, whose every read waits up to 60 s, and
stops it by sending UNSUBSCRIBE first and then telling the thread to stop. The server's reply to
UNSUBSCRIBE wakes the thread's read; on a busy machine the thread often reads it before it is
told to stop, finds itself subscribed to nothing and goes round once more, into redis-py's wait
of up to 60 s for a subscription that never comes, which the stop (redis-py 8 joins the thread)
waits out: a worker exited ~60 s after its last question in 2 of 2 threaded and 7 of 20 forked
tries. Here the order is the other way round: the thread is told to stop first, then UNSUBSCRIBE
is sent, and its reply wakes the read in progress, after which the thread ends. A connection
that broke (Redis gone) wakes the read too; the thread then ends instead of reconnecting.
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress

from redis.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.worker.base import BaseWorker

log = logging.getLogger("codebot.worker")

# One read's wait (RQ's own): a stop does not wait it out, UNSUBSCRIBE's reply ends it.
READ_SECONDS = 60.0
# After a broken connection, the next read (which reconnects and subscribes again) this much later.
RECONNECT_SECONDS = 2.0
# A stop waits this long for the thread (a Redis that stopped answering never replies); the
# thread, a daemon, then ends with the process.
STOP_WAIT_SECONDS = 5.0


class CommandListener(threading.Thread):
    """Reads a worker's command channel (its handlers run here) until `stop()`."""

    def __init__(self, pubsub: PubSub, worker_name: str) -> None:
        super().__init__(name=f"codebot-commands-{worker_name}", daemon=True)
        self.pubsub = pubsub
        self.worker_name = worker_name
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self._read()
        finally:
            with suppress(RedisError, OSError):
                self.pubsub.close()

    def _read(self) -> None:
        try:
            self.pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_SECONDS)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            if not self.stopping.is_set():
                log.warning("worker %s: command channel lost (%s); listening again", self.worker_name, exc)
                self.stopping.wait(RECONNECT_SECONDS)
        except Exception:  # a command that failed: the next one is still listened for
            log.exception("worker %s: an rq command failed", self.worker_name)

    def stop(self) -> bool:
        """Stop listening; True once the thread has ended. Told first, then woken: UNSUBSCRIBE's
        reply (or the broken connection's end) ends the read in progress."""
        self.stopping.set()
        if self.is_alive():
            try:
                self.pubsub.unsubscribe()
            except RedisError as exc:  # Redis gone: the read ends on the broken connection
                log.info("worker %s: could not unsubscribe (%s)", self.worker_name, exc)
            self.join(STOP_WAIT_SECONDS)
        if self.is_alive():
            log.warning(
                "worker %s: the command channel's reader did not stop in %g s; left to end with the process",
                self.worker_name,
                STOP_WAIT_SECONDS,
            )
            return False
        return True


def listen_for_commands(pubsub: PubSub, worker_name: str) -> CommandListener:
    """A started CommandListener on `pubsub` (subscribed already)."""
    listener = CommandListener(pubsub, worker_name)
    listener.start()
    return listener


def subscribe_to_commands(worker: BaseWorker) -> None:
    """RQ's `Worker.subscribe`, with the channel read on a CommandListener: for every RQ worker
    class of ours (the pools' CodebotWorker, and the SimpleWorker `codebot ask` answers in when
    no worker runs, whose exit waited the same 60 s)."""
    worker.pubsub = worker.connection.pubsub()
    worker.pubsub.subscribe(**{worker.pubsub_channel_name: worker.handle_payload})
    worker.pubsub_thread = listen_for_commands(worker.pubsub, worker.name)  # type: ignore[assignment]  # RQ declares it None until set


def unsubscribe_from_commands(worker: BaseWorker) -> None:
    """RQ's `Worker.unsubscribe` for a worker subscribed by `subscribe_to_commands`."""
    if isinstance(worker.pubsub_thread, CommandListener):
        worker.pubsub_thread.stop()
