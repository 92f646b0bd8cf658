"""The conversation a question is asked in: the earlier messages of its chat thread (or a log
the console's asker pasted), fitted to a budget, redacted and made inert, as context for the model.

Which platform reads a thread is the adapters' business (bot/slack/thread_reader.py,
bot/discord/thread_reader.py), registered in the Runtime by the composition root; this package
holds the reader's contract (`thread.py`) and what becomes of what it read (`context.py`).
"""
