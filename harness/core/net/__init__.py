"""Network helpers shared by every part of the harness that talks to a server it did not write (readiness,
scrapes, probe, token calibration): whole-request deadlines and caps on what a server may make it read."""
