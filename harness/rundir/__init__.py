"""The run directory's format, written and read in one place: the layout and file names, one model per journal line, the
journals, request records and their parts, attempts, bounded validated readers and what ``--resume`` has left to do.
"""
