"""The documentation's simulation, shared by the tests as a module.

The tests draw their noise models from ``tests/simulations/compare_rules.py`` so that the
documented simulation and the tested one are the same code.
"""

from types import ModuleType

from tests.simulations import compare_rules


def simulation() -> ModuleType:
    """The simulation script ``tests.simulations.compare_rules``."""
    return compare_rules
