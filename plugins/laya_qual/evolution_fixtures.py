"""Fixtures for the laya.evolution claims (filled by the evolution work)."""
