"""Host services that attach to a PluginHost."""
