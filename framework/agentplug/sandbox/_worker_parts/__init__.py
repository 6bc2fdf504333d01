"""Parts of the sandbox worker script (``agentplug/sandbox/_worker.py``), split out by job.

``frames`` (protocol frames on fd 0/1), ``seccomp`` (the syscall filter), ``audit`` (importable
modules and the audit hook), ``runtime`` (output sink, fetch channel) and ``javascript`` (the
V8 runner). The OS confinement, the Python runner and ``main`` stay in ``_worker.py``.

The worker runs as a script (``python -I -B <path>/_worker.py language workdir``). It imports
these modules as the top-level package ``_worker_parts`` (its own directory is put on
``sys.path`` just for that import) *before* it confines itself: after the chroot no file of
this package is reachable any more. So they must stay standard-library only (plus
``py_mini_racer``, imported lazily, for JavaScript), import each other relatively, and never
import agentplug or pydantic. The host never uses them.
"""
