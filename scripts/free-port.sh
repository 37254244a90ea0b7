# Sourced by scripts/kafka and scripts/postgres (which define die).
#
# free_port [TAKEN]: a port below the kernel's ephemeral range (so that no
# outgoing connection takes it meanwhile) that nothing listens on, other
# than TAKEN. Another process may still bind it first: the callers then try
# again with new ports.
free_port() {
  local low high port _
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  ((low > 11000)) || low=60000
  for _ in $(seq 100); do
    port=$((10000 + (RANDOM * 32768 + RANDOM) % (low - 10000)))
    [[ "$port" == "${1:-}" ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free port found"
}
