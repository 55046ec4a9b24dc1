"""Similar code across a hiring drive: winnowed fingerprints, an inverted index, pages.

Entry points: `drive.similarity_report` (grade-all's "similar pairs"), `__main__.main` and
`known.flags` (a grading's flags of the files that match known code).
"""
