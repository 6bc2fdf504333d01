"""Reading what the operator writes: the lowest layer of the runtime.

What belongs here: the operator config model and :func:`~agentplug.config.model.load_config`
(``model``), where a command finds its config file (``lookup``), the bounded readers of
data files and request bodies (``datafiles``), and the base of the error family
(``errors``). It imports only the contract (``agentplug_hookspecs``), pydantic and the
standard library; every other layer may import it (import-linter's layer contract in
pyproject.toml). Importing the package loads nothing: ``import agentplug`` needs the error
classes, not the models. Tests: tests/test_config.py, tests/test_config_lookup.py,
tests/test_bad_files.py.
"""
