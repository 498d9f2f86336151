"""The documentation's simulation script, shared by the tests as a module.

The tests draw their noise models from ``docs/simulations/compare_rules.py`` so that the
documented simulation and the tested one are the same code.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SIMULATION = Path(__file__).resolve().parents[2] / "docs" / "simulations" / "compare_rules.py"


def simulation() -> ModuleType:
    """The simulation script, loaded once as a module."""
    name = "docs_simulations_compare_rules"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SIMULATION)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
