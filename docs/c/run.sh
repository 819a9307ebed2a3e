#!/usr/bin/env bash
# Compiles and runs the CUDA C programs of the guide and of docs/driver-facts.md
# (docs/c/*.c, driver API only) on a machine with a GPU and nvcc, and keeps what each one
# printed.
#
#   bash docs/c/run.sh                  # all programs: writes docs/c/NAME.out next to each
#                                       # NAME.c, and docs/c/environment.out
#   bash docs/c/run.sh costs bandwidth  # only the programs named: writes their NAME.out,
#                                       # each starting with a line "[recorded on: ...]"
#                                       # (environment.out, which describes the other
#                                       # outputs, stays as it is)
#   OUT=/some/dir bash docs/c/run.sh [NAME...]
#                                       # writes one file, $OUT/c_outputs.txt, with a
#                                       # section "=== NAME.c ===" per program
#
# Each program is built with `nvcc -o NAME NAME.c -lcuda -lpthread` and run from the
# repository root with kernels/kernels.ptx as its argument, except destroyed_context: it
# loads no module and reads an argument as the step to run (it starts itself again once
# per step, with the step's name), so it gets none. Three of them are also run under
# `compute-sanitizer --tool memcheck` (NAME.sanitizer.out, section "=== NAME.c under
# compute-sanitizer ==="): free_while_running (with `no-realloc`), out_of_bounds, and
# sanitizer_leak with `--leak-check full --error-exitcode 99`, once as it is and once
# with `no-cuda-call` (sanitizer_leak.no-cuda-call.sanitizer.out). environment.out records
# the GPU, driver, nvcc and compute-sanitizer used.
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

# The programs to run: the names given, or every docs/c/*.c.
names=()
if [[ $# -gt 0 ]]; then
    for name in "$@"; do
        name=$(basename "$name" .c)
        if [[ ! -f $here/$name.c ]]; then
            echo "run.sh: no program docs/c/$name.c" >&2
            exit 2
        fi
        names+=("$name")
    done
    subset=1
else
    for src in "$here"/*.c; do
        names+=("$(basename "$src" .c)")
    done
    subset=0
fi

# begin OUTFILE: empties OUTFILE; in a run of named programs, starts it with the environment
begin() {
    : >"$1"
    if [[ $subset == 1 ]]; then
        echo "[recorded on: $(paste -sd ';' "$results/environment.out" | sed 's/;/; /g')]" >>"$1"
    fi
}

# sanitize NAME SUFFIX OPTION... -- ARG...: runs NAME under compute-sanitizer into
# $results/NAME.SUFFIXsanitizer.out
sanitize() {
    local name=$1 suffix=$2
    shift 2
    local options=()
    while [[ $1 != -- ]]; do
        options+=("$1")
        shift
    done
    shift
    local san=$results/$name.${suffix}sanitizer.out
    begin "$san"
    if command -v compute-sanitizer >/dev/null; then
        run "$san" compute-sanitizer "${options[@]}" "$build/$name" "$@"
    else
        echo "compute-sanitizer not found" >>"$san"
    fi
}

for name in "${names[@]}"; do
    src=$here/$name.c
    out=$results/$name.out
    begin "$out"
    if ! nvcc -o "$build/$name" "$src" -lcuda -lpthread >"$build/$name.log" 2>&1; then
        { echo "[nvcc failed]"; cat "$build/$name.log"; } >>"$out"
        continue
    fi
    echo "running $name" >&2
    args=("$ptx")
    [[ $name == destroyed_context ]] && args=()
    run "$out" "$build/$name" "${args[@]}"
    case $name in
    free_while_running) sanitize "$name" "" --tool memcheck -- "$ptx" no-realloc ;;
    out_of_bounds) sanitize "$name" "" --tool memcheck -- "$ptx" ;;
    sanitizer_leak)
        leak=(--tool memcheck --leak-check full --error-exitcode 99)
        sanitize "$name" "" "${leak[@]}" -- "$ptx"
        sanitize "$name" "no-cuda-call." "${leak[@]}" -- "$ptx" no-cuda-call
        ;;
    esac
done

if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    combined=$OUT/c_outputs.txt
    {
        echo "=== environment ==="
        cat "$results/environment.out"
        for name in "${names[@]}"; do
            echo "=== $name.c ==="
            cat "$results/$name.out"
            for san in "$results/$name".*sanitizer.out; do
                [[ -f $san ]] || continue
                how=${san#"$results/$name."}
                how=${how%sanitizer.out}
                echo "=== $name.c under compute-sanitizer${how:+ (${how%.})} ==="
                cat "$san"
            done
        done
    } >"$combined"
    echo "wrote $combined" >&2
else
    [[ $subset == 1 ]] && rm "$results/environment.out"
    cp "$results"/*.out "$here"/
    echo "wrote $(cd "$results" && ls *.out | tr '\n' ' ')into $here" >&2
fi
