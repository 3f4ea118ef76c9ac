"""laya_qual: the qualification harness for laya, as a pytest plugin.

Opt in with ``pytest -p laya_qual``; installing the package changes nobody's other
pytest runs. The plugin is split by job: options, marker and collection rules in
``plugin``, fixtures in ``fixtures`` and ``evolution_fixtures``, the evidence every
test process attaches to its reports in ``evidence``, report assembly on the
controller in ``assembler`` (the report model is ``report``).
"""

__version__ = "0.1.0"

pytest_plugins = (
    "laya_qual.plugin",
    "laya_qual.fixtures",
    "laya_qual.evolution_fixtures",
    "laya_qual.evidence",
    "laya_qual.assembler",
)
