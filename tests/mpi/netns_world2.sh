#!/usr/bin/env bash
# tests/mpi/netns_world2.sh TEST_BINARY: the World2 suites of densa_mpi_tests with their two
# ranks on two "hosts": network namespaces joined by a veth pair, talking TCP (Open MPI's
# shared-memory transport off: --mca btl self,tcp) over that link only. mpirun runs in the
# first namespace and starts each rank's daemon through a launch agent that enters the rank's
# namespace (ip netns exec) where a real cluster would use ssh. Needs root for `ip netns`;
# without it the test exits 77, which ctest reports as skipped (not passed).
set -euo pipefail
BIN=${1:?usage: netns_world2.sh TEST_BINARY}
tag=$$
a=dmpa$tag b=dmpb$tag net=10.79.$((tag % 250))
dir=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
if ! { ip netns add "$a" && ip netns add "$b" && ip link add "va$tag" type veth peer name "vb$tag" &&
       ip link set "va$tag" netns "$a" && ip link set "vb$tag" netns "$b" &&
       ip -n "$a" addr add "$net.1/24" dev "va$tag" && ip -n "$b" addr add "$net.2/24" dev "vb$tag" &&
       ip -n "$a" link set "va$tag" up && ip -n "$b" link set "vb$tag" up &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up; } 2>"$dir/ip.err"; then
  echo "netns_world2: cannot create network namespaces (needs root): $(cat "$dir/ip.err")" >&2
  exit 77
fi
# Both ends up with carrier before any rank starts (a veth end set up before its peer reports
# NO-CARRIER for a moment).
for _ in $(seq 100); do
  ip -n "$a" link show "va$tag" | grep -q 'state UP' && ip -n "$b" link show "vb$tag" | grep -q 'state UP' && break
  sleep 0.05
done
cat >"$dir/agent" <<'AGENT'
#!/bin/sh
# Open MPI launch agent: "agent HOST CMD..." runs CMD in network namespace HOST.
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
AGENT
chmod +x "$dir/agent"
printf '%s slots=1\n%s slots=1\n' "$a" "$b" >"$dir/hosts"
# rtc_hwloc_vmhole none: the far namespace's orted (the only daemon a one-host run starts) would
# otherwise map hwloc's topology into a hole it picks in its address space, and now and then
# segfaults writing it (hwloc_shmem_topology_write, seen once in a few parallel ctest runs);
# the ranks do not need that shared copy. orte_tmpdir_base: a session directory of this run's
# own, not the /tmp one every mpirun of the user shares (tests/e2e/server_process.h says why).
MPI=(ip netns exec "$a" mpirun --allow-run-as-root --hostfile "$dir/hosts" -n 2 --mca plm_rsh_agent "$dir/agent"
     --mca btl self,tcp --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24"
     --mca rtc_hwloc_vmhole none --mca orte_tmpdir_base "$dir")
# Each rank in its own namespace: rank r sees only its own end of the link.
where=$("${MPI[@]}" sh -c 'echo "$OMPI_COMM_WORLD_RANK $(ip -4 -o addr show | grep -o "'"$net"'\.[0-9]*")"' 2>"$dir/where.err" | sort) || {
  echo "netns_world2: mpirun across the namespaces failed:" >&2
  cat "$dir/where.err" >&2
  ip -n "$a" addr >&2
  ip -n "$b" addr >&2
  exit 1
}
echo "netns_world2: ranks and their addresses: $(echo "$where" | tr '\n' ';')"
[ "$where" = "0 $net.1
1 $net.2" ] || { echo "netns_world2: ranks are not in their own namespaces" >&2; exit 1; }
"${MPI[@]}" "$BIN" --gtest_filter='World2.*'
