"""Similar code across a hiring drive: winnowed fingerprints, an inverted index, pages.

Entry points: `report.similarity_report` (grade-all's "similar pairs") and `__main__.main`.
"""
