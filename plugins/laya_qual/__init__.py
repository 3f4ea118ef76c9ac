"""laya_qual: the qualification harness for laya, as a pytest plugin.

Opt in with ``pytest -p laya_qual``; installing the package changes nobody's other
pytest runs. The plugin is split by job: options, marker and collection rules in
``plugin``, fixtures in ``fixtures`` and ``evolution_fixtures``, the evidence every
test process attaches to its reports in ``evidence``, report assembly on the
controller in ``assembler`` (the report model is ``report``).
"""

from importlib.util import find_spec

__version__ = "0.1.0"

# The qualification harness: each distribution of the `qualify` extra and the module it
# provides. `pip install laya-qual` alone installs the runtime and this package without
# them; the plugin and `laya-qual` then stop with one line naming the install command.
HARNESS = {"pytest": "pytest", "hypothesis": "hypothesis", "pytest-xdist": "xdist",
           "pytest-benchmark": "pytest_benchmark", "securesystemslib": "securesystemslib",
           "cryptography": "cryptography", "scipy": "scipy", "transformers": "transformers",
           "coverage": "coverage", "pytest-cov": "pytest_cov"}
INSTALL_HARNESS = "pip install 'laya-qual[qualify]'"

pytest_plugins = (
    "laya_qual.plugin.hooks",
    "laya_qual.plugin.fixtures",
    "laya_qual.plugin.evolution_fixtures",
    "laya_qual.plugin.evidence",
    "laya_qual.plugin.assembler",
)


def missing_harness() -> str | None:
    """One line saying which harness distributions are missing here and how to install
    them, or None when all are importable (looked up, not imported: this stays cheap)."""
    missing = [dist for dist, module in HARNESS.items() if find_spec(module) is None]
    if not missing:
        return None
    return f"laya_qual needs its qualification harness ({', '.join(missing)} missing): {INSTALL_HARNESS}"
