"""The labs: architecture and scaling calculators, and the probing lab."""
