"""The agent runtime: the turn runner, model providers and tools."""
