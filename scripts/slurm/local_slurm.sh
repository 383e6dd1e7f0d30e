#!/usr/bin/env bash
# A real Slurm (Debian slurm-wlm + munge) on this machine for tests, started in a
# temporary directory with no cgroup support.
#   local_slurm.sh start <dir> [nodes]
#        installs what is missing, writes <dir>/slurm.conf, starts munged (if not
#        running), slurmctld and one slurmd per node, waits for the nodes to be idle;
#        exit 77 when the daemons cannot start. nodes > 1 describes that many nodes,
#        <host>-n0, <host>-n1, ..., all on this host (one `slurmd -N <node>` each, on
#        127.0.0.1 with its own port, spool and log); their names do not resolve, so
#        jobs set MASTER_ADDR=127.0.0.1.
#   local_slurm.sh stop <dir>    stops the daemons it started (by their PIDs)
# Then: SLURM_CONF=<dir>/slurm.conf srun -N1 -n2 ...  (or -N2 -n4 with two nodes)
set -euo pipefail
cmd=${1:?start|stop} dir=${2:?directory} nodes=${3:-1}
skip() { echo "local_slurm: SKIP: $*" >&2; exit 77; }

if [[ $cmd == stop ]]; then
  for pid_file in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
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
CONF
if [[ $nodes -eq 1 ]]; then
  names=$host
  echo "NodeName=$host CPUs=$(nproc) State=UNKNOWN" >>"$dir/slurm.conf"
else
  # One slurmd per node on this host: %n makes each daemon's files its own.
  sed -i -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$dir/spool/%n|" -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$dir/slurmd-%n.pid|" \
    -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$dir/slurmd-%n.log|" "$dir/slurm.conf"
  port=$(( 8817 + RANDOM % 1000 ))
  names=
  for i in $(seq 0 $(( nodes - 1 ))); do
    names="$names${names:+,}$host-n$i"
    mkdir -p "$dir/spool/$host-n$i"
    echo "NodeName=$host-n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$(( port + i )) CPUs=$(nproc) State=UNKNOWN" \
      >>"$dir/slurm.conf"
  done
fi
echo "PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"

if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
  munged --force 2>"$dir/munged.err" || skip "munged does not start: $(tail -1 "$dir/munged.err")"
  pgrep -n -x munged >"$dir/munged.pid" || true
  munge -n | unmunge >/dev/null 2>&1 || skip "munge does not authenticate"
fi
slurmctld -f "$SLURM_CONF" 2>"$dir/slurmctld.err" || skip "slurmctld does not start: $(tail -1 "$dir/slurmctld.err")"
if [[ $nodes -eq 1 ]]; then
  slurmd -f "$SLURM_CONF" 2>"$dir/slurmd.err" || { "$0" stop "$dir"; skip "slurmd does not start"; }
else
  for node in ${names//,/ }; do
    slurmd -f "$SLURM_CONF" -N "$node" 2>"$dir/slurmd-$node.err" ||
      { "$0" stop "$dir"; skip "slurmd -N $node does not start: $(tail -1 "$dir/slurmd-$node.err")"; }
  done
fi
for _ in $(seq 1 30); do
  if [[ $(sinfo -h -N -o %T 2>/dev/null | grep -Ec '^(idle|mixed)') -ge $nodes ]]; then
    echo "local_slurm: $nodes node(s) idle: $names (SLURM_CONF=$SLURM_CONF)" >&2
    exit 0
  fi
  sleep 1
done
"$0" stop "$dir"
skip "the node did not become idle within 30 s (see $dir/slurmctld.log, $dir/slurmd.log)"
