"""Release tools that act on signed reports: ``compare`` (and its ``--fail-on`` gates),
``merge`` (the shards of one run into one report) and ``run --plan``.
"""
