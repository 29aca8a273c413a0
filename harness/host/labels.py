"""What marks a thing as the harness's: the labels on its containers (run, arm, owner process) and the marker file
in disk-tier directories it created (vouched for by :mod:`harness.host.markers`)."""

RUN_LABEL = "io.kvoffload-harness.run"          # value: run id
ARM_LABEL = "io.kvoffload-harness.arm"          # value: arm name
OWNER_LABEL = "io.kvoffload-harness.owner"      # value: "harness"
# Who started the container: ``harness cleanup`` removes it only once that process is gone (or its run is named).
HOST_LABEL = "io.kvoffload-harness.owner-host"  # value: host name of the orchestrating harness process
UID_LABEL = "io.kvoffload-harness.owner-uid"    # value: its user id
PID_LABEL = "io.kvoffload-harness.owner-pid"    # value: "pid:start time" of the orchestrating harness process
DISK_TIER_MARKER = ".kvoffload-harness-owned"   # file the harness writes into disk-tier directories it created
