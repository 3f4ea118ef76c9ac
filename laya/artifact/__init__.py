"""artifact-v1 as bytes: the manifest and its pinned files, safetensors weights read from
their hashed bytes, bindings (canonical JSON, digests), names, and outputs written whole.

Nothing here computes: serving, training and evolution build on it; it imports none of them.
"""
