"""Install, eject, sync and reinject plugins (and agentplug itself).

:class:`PluginManager` backs the plugin-management built-in actions (ACTIONS.md §4) and the
``agentplug plugin ...`` command line:

* :meth:`~PluginManager.install` downloads every distribution that will be installed first
  (``pip download``: the package and, when ``install_dependencies`` is true, its
  dependencies), lets :func:`agentplug.services.install.check_install` inspect each downloaded file
  (``security.install_policy``, then ``before_install``; the requested package first), and
  only then ``pip install``\\ s from those very files, offline (``--no-index --find-links
  <download folder>``, ``--no-deps``, the exact files), so nothing uninspected can be
  fetched. Installing into the environment (no ``target``), dependencies the environment
  already satisfies are left alone: an offline ``pip install --dry-run`` over the download
  folder says which downloaded files pip would add, and only those are inspected and
  installed. Any block stops the whole install and leaves nothing installed; the report
  names the blocked distribution and lists every inspected one. Each ``before_install``
  event also carries ``requested`` and ``dependency_of`` (extra, read-only fields).
* :meth:`~PluginManager.eject` puts a plugin's source under ``<state_dir>/plugins/<id>/`` as
  a git working copy: branch ``main`` for local edits, branch ``upstream`` for the pristine
  upstream code, and ``.agentplug-upstream.json`` describing where it came from. The source
  is the distribution's git repository when it records one (``direct_url.json``
  ``vcs_info``, a local directory install that is a git work tree, or a ``Project-URL:
  Source``/``Repository`` that is a git URL or a local git repository), else its sdist
  (``pip download --no-binary :all:``). The work happens in a temporary folder that is
  renamed into place at the end: a failure never leaves a half-ejected plugin.
* :meth:`~PluginManager.sync` fetches upstream (``git fetch``, or the newest sdist committed
  onto ``upstream``) and merges it into ``main``; local uncommitted edits are committed
  first. A conflict is reported with the conflicting files and the merge is aborted, so
  the working copy is left clean and un-merged.
* :meth:`~PluginManager.reinject` removes the ejected copy so the installed package loads.

Operations are serialised per plugin: an :class:`asyncio.Lock` per id inside the process,
and an exclusive file lock under ``<state_dir>/locks/`` across processes.

The loader prefers an ejected copy through :func:`activate_ejected_source` (or the lower
level :func:`ejected_source`).

:class:`PluginManager` (``facade.py``) builds its collaborators once and delegates to them:
:class:`CommandRunner` (``runner.py``, every pip and git command), ``OperationLocks``
(``locking.py``), ``Distributions`` (``distributions.py``, what is installed),
``PipCommands`` (``pip_commands.py``), ``SourceFetcher`` (``sources.py``, where upstream
is and fetching it), ``InstallChecks`` (``checks.py``), ``WorkingCopies``
(``working_copies.py``, the ejected folders and their records), and one class per
operation: ``Installer``, ``Ejector``, ``Syncer``, ``Reinjector`` and ``CoreLocator``
(``core_status``).

Settings (``actions.plugins`` in the operator config)::

    {"actions": {"plugins": {"index_url": "https://pypi.org/simple",
                             "find_links": ["/srv/wheels"], "no_index": false,
                             "target": null, "python": null,
                             "build_isolation": true, "install_dependencies": true,
                             "state_dir": null, "restart": true, "timeout_s": 600}}}
"""

from __future__ import annotations

# Re-exports: the public names of the manager, from the modules that hold them.
from agentplug.plugins.ejected import CORE_DISTRIBUTION as CORE_DISTRIBUTION
from agentplug.plugins.ejected import (
    DEFAULT_STATE_DIR,
    RECORD_FILE,
    PluginSettings,
    UpstreamRecord,
    activate_ejected_source,
    activate_install_target,
    ejected_import_roots,
    ejected_source,
    plugin_settings,
    prefer_ejected_copy,
    resolve_state_dir,
)
from agentplug.plugins.ejected import LOCAL_BRANCH as LOCAL_BRANCH
from agentplug.plugins.ejected import STATE_DIR_ENV as STATE_DIR_ENV
from agentplug.plugins.ejected import UPSTREAM_BRANCH as UPSTREAM_BRANCH
from agentplug.plugins.manager.checks import InstallBlockedError
from agentplug.plugins.manager.cli import add_plugin_management_commands
from agentplug.plugins.manager.facade import PluginManager
from agentplug.plugins.manager.locating import core_import_roots
from agentplug.plugins.manager.locating import source_fingerprint as source_fingerprint
from agentplug.plugins.manager.reports import (
    CoreStatus,
    EjectedPlugin,
    EjectReport,
    InspectedDistribution,
    InstallReport,
    PluginManagerError,
    ReinjectReport,
    SyncReport,
    UnknownPluginError,
)
from agentplug.plugins.manager.runner import CommandRunner

__all__ = [
    "DEFAULT_STATE_DIR",
    "RECORD_FILE",
    "CommandRunner",
    "CoreStatus",
    "EjectReport",
    "EjectedPlugin",
    "InspectedDistribution",
    "InstallBlockedError",
    "InstallReport",
    "PluginManager",
    "PluginManagerError",
    "PluginSettings",
    "ReinjectReport",
    "SyncReport",
    "UnknownPluginError",
    "UpstreamRecord",
    "activate_ejected_source",
    "activate_install_target",
    "add_plugin_management_commands",
    "core_import_roots",
    "ejected_import_roots",
    "ejected_source",
    "plugin_settings",
    "prefer_ejected_copy",
    "resolve_state_dir",
]
