#!/usr/bin/env bash
# A real one-node Slurm (Debian slurm-wlm + munge) for tests, started in a temporary
# directory with no cgroup support.
#   local_slurm.sh start <dir>   installs what is missing, writes <dir>/slurm.conf, starts
#                                munged (if not running), slurmctld and slurmd, waits for
#                                the node to be idle; exit 77 when the daemons cannot start
#   local_slurm.sh stop <dir>    stops the daemons it started (by their PIDs)
# Then: SLURM_CONF=<dir>/slurm.conf srun -N1 -n2 ...
set -euo pipefail
cmd=${1:?start|stop} dir=${2:?directory}
skip() { echo "local_slurm: SKIP: $*" >&2; exit 77; }

if [[ $cmd == stop ]]; then
  for name in slurmd slurmctld munged; do
    pid_file="$dir/$name.pid"
    [[ -f $pid_file ]] && kill "$(cat "$pid_file")" 2>/dev/null || true
  done
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  [[ $(id -u) -eq 0 ]] || skip "slurm-wlm and munge are not installed and this user cannot install them"
  echo "local_slurm: installing slurm-wlm and munge" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >"$dir.apt.log" 2>&1 ||
    skip "apt-get install slurm-wlm munge failed (see $dir.apt.log)"
fi
[[ $(id -u) -eq 0 ]] || skip "the test's slurm.conf runs the daemons as root"
mkdir -p "$dir"/{state,spool}
host=$(hostname -s)
cat >"$dir/slurm.conf" <<CONF
ClusterName=runner-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=$(( 6817 + RANDOM % 1000 ))
SlurmdPort=$(( 7817 + RANDOM % 1000 ))
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"

if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
  munged --force 2>"$dir/munged.err" || skip "munged does not start: $(tail -1 "$dir/munged.err")"
  pgrep -n -x munged >"$dir/munged.pid" || true
  munge -n | unmunge >/dev/null 2>&1 || skip "munge does not authenticate"
fi
slurmctld -f "$SLURM_CONF" 2>"$dir/slurmctld.err" || skip "slurmctld does not start: $(tail -1 "$dir/slurmctld.err")"
slurmd -f "$SLURM_CONF" 2>"$dir/slurmd.err" || { "$0" stop "$dir"; skip "slurmd does not start"; }
for _ in $(seq 1 30); do
  if sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed)'; then
    echo "local_slurm: node $host idle (SLURM_CONF=$SLURM_CONF)" >&2
    exit 0
  fi
  sleep 1
done
"$0" stop "$dir"
skip "the node did not become idle within 30 s (see $dir/slurmctld.log, $dir/slurmd.log)"
