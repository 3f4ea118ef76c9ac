"""Measuring the suite itself: seeded defects, automatic mutants and the sampled kill
rate, branch coverage, the traceability map, and the figures a report carries from them.
"""
