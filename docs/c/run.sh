#!/usr/bin/env bash
# Compiles and runs every CUDA C program of the guide (docs/c/*.c, driver API only) on a
# machine with a GPU and nvcc, and keeps what each one printed.
#
#   bash docs/c/run.sh                  # writes docs/c/NAME.out next to each NAME.c
#   OUT=/some/dir bash docs/c/run.sh    # writes one file, $OUT/c_outputs.txt, with a
#                                       # section "=== NAME.c ===" per program
#
# Each program is built with `nvcc -o NAME NAME.c -lcuda -lpthread` and run from the
# repository root with kernels/kernels.ptx as its argument, except destroyed_context: it
# loads no module and reads an argument as the step to run (it starts itself again once
# per step, with the step's name), so it gets none. Two of them are also run under
# `compute-sanitizer --tool memcheck` (NAME.sanitizer.out, section "=== NAME.c under
# compute-sanitizer ==="). environment.out records the GPU, driver and nvcc used.
# Outputs are the programs' stdout and stderr, then one line "[exit status N]".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ptx="$root/kernels/kernels.ptx"
export PATH="$PATH:/usr/local/cuda/bin"
cd "$root"

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
results=$build/results
mkdir -p "$results"

# run OUTFILE COMMAND...: runs the command, appends its output and exit status to OUTFILE
run() {
    local out=$1
    shift
    timeout 300 "$@" >>"$out" 2>&1
    echo "[exit status $?]" >>"$out"
}

{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1
    nvcc --version 2>&1 | grep -i release
    if command -v compute-sanitizer >/dev/null; then
        compute-sanitizer --version 2>&1 | grep -i version | head -n 1
    else
        echo "compute-sanitizer: not found"
    fi
} >"$results/environment.out"

sanitized="free_while_running out_of_bounds"
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    out=$results/$name.out
    : >"$out"
    if ! nvcc -o "$build/$name" "$src" -lcuda -lpthread >"$build/$name.log" 2>&1; then
        { echo "[nvcc failed]"; cat "$build/$name.log"; } >>"$out"
        continue
    fi
    echo "running $name" >&2
    args=("$ptx")
    [[ $name == destroyed_context ]] && args=()
    run "$out" "$build/$name" "${args[@]}"
    if [[ " $sanitized " == *" $name "* ]]; then
        san=$results/$name.sanitizer.out
        : >"$san"
        if command -v compute-sanitizer >/dev/null; then
            extra=()
            [[ $name == free_while_running ]] && extra=(no-realloc)
            run "$san" compute-sanitizer --tool memcheck "$build/$name" "$ptx" "${extra[@]}"
        else
            echo "compute-sanitizer not found" >>"$san"
        fi
    fi
done

if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    combined=$OUT/c_outputs.txt
    {
        echo "=== environment ==="
        cat "$results/environment.out"
        for src in "$here"/*.c; do
            name=$(basename "$src" .c)
            echo "=== $name.c ==="
            cat "$results/$name.out"
            if [[ -f $results/$name.sanitizer.out ]]; then
                echo "=== $name.c under compute-sanitizer ==="
                cat "$results/$name.sanitizer.out"
            fi
        done
    } >"$combined"
    echo "wrote $combined" >&2
else
    cp "$results"/*.out "$here"/
    echo "wrote $(cd "$results" && ls *.out | tr '\n' ' ')into $here" >&2
fi
