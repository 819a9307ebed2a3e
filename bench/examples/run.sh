#!/usr/bin/env bash
# Runs the probes of bench/examples/ and keeps what each printed, as docs/c/run.sh does for
# the C programs: bench/examples/NAME.out next to NAME.rs.
#
#   cargo build --release --examples -p cuda-brand-bench   # where cargo is (no GPU needed)
#   bash bench/examples/run.sh [NAME...]                   # from the repository root
#
# Without names it runs the probes whose output docs/driver-facts.md cites: peer_crates,
# pageable_dtoh and handle_sizes. Each output is one line "[recorded on: GPU, driver]",
# then the probe's stdout and stderr, then one line "[exit status N]".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
[[ $# -gt 0 ]] || set -- peer_crates pageable_dtoh handle_sizes

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
for name in "$@"; do
    bin=$root/target/release/examples/$name
    out=$here/$name.out
    if [[ ! -x $bin ]]; then
        echo "run.sh: $bin is missing: build it with cargo build --release --examples -p cuda-brand-bench" >&2
        exit 2
    fi
    echo "running $name" >&2
    echo "[recorded on: ${gpu:-no GPU (nvidia-smi found none)}]" >"$out"
    timeout 600 "$bin" >>"$out" 2>&1
    echo "[exit status $?]" >>"$out"
done
echo "wrote $(printf '%s.out ' "$@")into $here" >&2
