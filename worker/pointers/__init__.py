"""What a question points at: links to lines of whitelisted repos and stack-trace frames,
found in its text (parse.py, pure) and read through the tool layer (gather.py).

The agent calls `gather_pointers` before its first model request; a thread's text can go
through the same function.
"""

from worker.pointers.gather import Pointer, gather_pointers, pointers_message, read_pointers

__all__ = ["Pointer", "gather_pointers", "pointers_message", "read_pointers"]
