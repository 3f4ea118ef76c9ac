"""The pytest plugin itself: hooks (options, the claim marker, collection rules),
fixtures, the evidence each test process attaches, what a run selected (its shard
included), progress, the checks before the first test, and report assembly on the controller.

Enabled as ``pytest -p laya_qual``; ``laya_qual.pytest_plugins`` lists these modules.
"""
