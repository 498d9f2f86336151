"""Seeded simulations behind docs/statistics.md.

Each runs as ``python -m tests.simulations.<name>`` from the project root and is imported by
the tests that check the documented targets, so the documented and the tested simulation
are the same code.
"""
