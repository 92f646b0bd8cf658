"""The agent: the model tool loop, its system prompt, citation checking and the eval runner."""
