"""What a question points at: links to lines of whitelisted repos and stack-trace frames,
found in its text (parse.py, pure) and read through the tool layer (gather.py).

The agent calls `read_pointers` before its first model request, on the question's words and
then on the thread or pasted log it was asked with (worker/jobs/job.py passes both).
"""

from worker.pointers.gather import Pointer, gather_pointers, pointers_message, read_pointers

__all__ = ["Pointer", "gather_pointers", "pointers_message", "read_pointers"]
