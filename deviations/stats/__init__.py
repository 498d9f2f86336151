"""Pure statistics core: numpy/scipy only, no Django (see docs/statistics.md)."""
