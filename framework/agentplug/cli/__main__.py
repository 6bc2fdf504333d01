"""``python -m agentplug.cli``."""

from agentplug.cli.main import main

raise SystemExit(main())
