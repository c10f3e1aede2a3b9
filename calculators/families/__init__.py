"""The calculators, one module per calculator or per small family of them, grouped by topic."""
