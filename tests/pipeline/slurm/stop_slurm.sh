#!/bin/bash
# Stops the daemons start_slurm.sh started (by their pid files in STATE_DIR).
d=$1
for p in "$d/run/slurmd.pid" "$d/run/slurmctld.pid"; do
  [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null
done
exit 0
