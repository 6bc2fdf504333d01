"""The pytest plugin, its fixtures and the scenario runner."""
