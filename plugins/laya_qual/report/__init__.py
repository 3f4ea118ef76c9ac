"""The signed report: its model (the two in-toto statements), DSSE signing, offline
verification, the environment and provenance it records, and its human views (terminal
table, Markdown, one HTML page).
"""
