"""The entrance x rule matrix of issue 26: a rule written once holds on every entrance."""
