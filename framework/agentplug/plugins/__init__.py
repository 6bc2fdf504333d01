"""Plugin management: install, eject, sync, reinject, ejected copies, supervisor."""
