"""Facts about this machine and what the harness owns on it: the owning process, the per-user state directory, container
labels, disk-tier markers and directories, pid files, leftovers, the Docker host and the parent watchdog.
"""
