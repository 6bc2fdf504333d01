"""The hook runtime: markers, dispatch, reducers, host, loader, config, errors."""
