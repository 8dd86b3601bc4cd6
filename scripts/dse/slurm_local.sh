#!/usr/bin/env bash
# A single-node Slurm (slurmctld + slurmd on this machine) in a scratch dir, for
# the DSE's `--engine slurm` test and for measuring the Slurm speed-up here.
#   scripts/dse/slurm_local.sh start DIR   write DIR/slurm.conf, start munged (as
#                                          the munge user), slurmctld and slurmd;
#                                          prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/dse/slurm_local.sh stop DIR    scontrol shutdown, stop munged if we started it
# The recipe is the measured one in /work/shared/notes/toolchain.md ("Slurm on
# one machine"): no cgroup plugins (they would move jobs out of this sandbox's
# cgroup), root as SlurmUser, state and logs in DIR. Exit 77 = cannot run here
# (not root, or Slurm / munge not installed): callers treat it as a skip.
set -euo pipefail
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then echo "slurm_local: needs root (slurmd runs jobs as any user)" >&2; exit 77; fi
for t in slurmctld slurmd sbatch squeue scontrol munged; do
  command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] || { echo "slurm_local: $t is not installed" >&2; exit 77; }
done
PATH=$PATH:/usr/sbin
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf

case $cmd in
start)
  host=$(hostname -s)
  cpus=$(nproc)
  mkdir -p "$dir/state" "$dir/spool"
  cat > "$conf" <<EOF
ClusterName=tessera-dse
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=${SLURM_LOCAL_PORT:-6917}
SlurmdPort=$(( ${SLURM_LOCAL_PORT:-6917} + 1 ))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=dse Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # munged refuses to run as root; start it as munge unless one is already up.
  if ! pgrep -u munge -x munged >/dev/null; then
    if ! runuser -u munge -- test -w /dev/null; then
      echo "slurm_local: munged (as munge) cannot write /dev/null (mode $(stat -c %a /dev/null), expected 666)" >&2
      exit 1
    fi
    install -d -o munge -g munge /run/munge
    runuser -u munge -- /usr/sbin/munged
    touch "$dir/munged.ours"
  fi
  slurmctld -f "$conf"
  slurmd -f "$conf"
  for _ in $(seq 1 60); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      echo "export SLURM_CONF=$conf"; exit 0
    fi
    sleep 0.5
  done
  echo "slurm_local: the node did not come up in 30 s; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  exit 1
  ;;
stop)
  [ -f "$conf" ] || exit 0
  scontrol shutdown >/dev/null 2>&1 || true
  for _ in $(seq 1 20); do
    [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null || break
    sleep 0.5
  done
  if [ -f "$dir/munged.ours" ]; then
    runuser -u munge -- /usr/sbin/munged --stop >/dev/null 2>&1 || true
    rm -f "$dir/munged.ours"
  fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
