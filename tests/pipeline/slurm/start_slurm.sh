#!/bin/bash
# Starts a throwaway single-node Slurm (munge + slurmctld + slurmd, all as root) for the
# Slurm export test. Prints the SLURM_CONF path on success; exits 77 when Slurm is not
# installed (the test then reports a visible skip). Usage: start_slurm.sh STATE_DIR
set -u
d=$1
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || {
  echo "slurm-wlm / munge not installed"; exit 77; }
mkdir -p "$d"/{state,spool,run} /run/munge /var/log/munge /var/lib/munge /etc/munge
chmod 0711 /var/lib/munge /run/munge; chmod 0700 /var/log/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chmod 0400 /etc/munge/munge.key
fi
pgrep -x munged >/dev/null || munged --force || { echo "munged failed to start"; exit 1; }
host=$(hostname -s)
cpus=$(nproc)
cat > "$d/slurm.conf" <<CONF
ClusterName=ckci
SlurmctldHost=$host
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6917
SlurmdPort=6918
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$d/slurm.conf"
slurmctld -f "$SLURM_CONF" || { echo "slurmctld failed"; cat "$d/slurmctld.log"; exit 1; }
slurmd -f "$SLURM_CONF" || { echo "slurmd failed"; cat "$d/slurmd.log"; exit 1; }
for i in $(seq 1 30); do
  if sinfo -h -o %T 2>/dev/null | grep -q -E "idle|mix|alloc"; then echo "$SLURM_CONF"; exit 0; fi
  sleep 1
done
echo "slurm did not come up"; sinfo; tail -5 "$d/slurmctld.log" "$d/slurmd.log"; exit 1
