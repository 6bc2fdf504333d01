"""One driver per gateway entrance (see tests/entrances/entrance.py)."""
