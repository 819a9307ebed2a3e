#!/usr/bin/env bash
# Compiles and runs the CUDA C programs (driver API only) on a machine with a GPU and nvcc,
# and keeps what each one printed next to it: the guide's programs in docs/c/*.c, and the
# measurements of docs/driver-facts.md in docs/c/facts/*.c.
#
#   bash docs/c/run.sh                  # every program: writes NAME.out next to each
#                                       # NAME.c, and docs/c/environment.out
#   bash docs/c/run.sh costs bandwidth  # only the programs named (from either folder)
#   OUT=/some/dir bash docs/c/run.sh [NAME...]
#                                       # writes one file, $OUT/c_outputs.txt, with a
#                                       # section "=== NAME.c ===" per program
#                                       # ("=== facts/NAME.c ===" for docs/c/facts/)
#
# docs/c/environment.out records the GPU, driver, nvcc and compute-sanitizer of a run of
# every program, and describes the outputs in docs/c/. An output in docs/c/facts/, and
# every output of a run of named programs, starts with the same facts on one line
# "[recorded on: ...]" (a run of named programs leaves environment.out as it is).
#
# Each program is built with `nvcc -o NAME NAME.c -lcuda -lpthread` and run from the
# repository root with kernels/kernels.ptx as its argument, except destroyed_context: it
# loads no module and reads an argument as the step to run (it starts itself again once
# per step, with the step's name), so it gets none. Three of them are also run under
# `compute-sanitizer --tool memcheck` (NAME.sanitizer.out, section "=== NAME.c under
# compute-sanitizer ==="): free_while_running (with `no-realloc`), out_of_bounds, and
# facts/sanitizer_leak with `--leak-check full --error-exitcode 99`, once as it is and
# once with `no-cuda-call` (sanitizer_leak.no-cuda-call.sanitizer.out). peer_views needs
# two GPUs: on a machine with fewer it is not run, and no peer_views.out is written.
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
recorded_on="[recorded on: $(paste -sd ';' "$results/environment.out" | sed 's/;/; /g')]"

# The programs to run, as paths relative to docs/c (NAME.c or facts/NAME.c): the names
# given, or every program of both folders.
programs=()
if [[ $# -gt 0 ]]; then
    subset=1
    for name in "$@"; do
        name=$(basename "$name" .c)
        if [[ -f $here/$name.c ]]; then
            programs+=("$name.c")
        elif [[ -f $here/facts/$name.c ]]; then
            programs+=("facts/$name.c")
        else
            echo "run.sh: no program $name.c in docs/c or docs/c/facts" >&2
            exit 2
        fi
    done
else
    subset=0
    for src in "$here"/*.c "$here"/facts/*.c; do
        programs+=("${src#"$here/"}")
    done
fi

# begin OUTFILE PROGRAM: empties OUTFILE, and starts it with the environment where the
# rules above say so
begin() {
    : >"$1"
    if [[ $subset == 1 || $2 == facts/* ]]; then
        echo "$recorded_on" >>"$1"
    fi
}

# sanitize PROGRAM SUFFIX OPTION... -- ARG...: runs the built PROGRAM under
# compute-sanitizer into $results/PROGRAM without .c, then .SUFFIXsanitizer.out
sanitize() {
    local program=$1 suffix=$2
    shift 2
    local options=()
    while [[ $1 != -- ]]; do
        options+=("$1")
        shift
    done
    shift
    local name
    name=$(basename "$program" .c)
    local san=$results/${program%.c}.${suffix}sanitizer.out
    begin "$san" "$program"
    if command -v compute-sanitizer >/dev/null; then
        run "$san" compute-sanitizer "${options[@]}" "$build/$name" "$@"
    else
        echo "compute-sanitizer not found" >>"$san"
    fi
}

mkdir -p "$results/facts"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
for program in "${programs[@]}"; do
    name=$(basename "$program" .c)
    if [[ $name == peer_views && $gpus -lt 2 ]]; then
        echo "skipping $program: it needs two GPUs, this machine has $gpus" >&2
        continue
    fi
    out=$results/${program%.c}.out
    begin "$out" "$program"
    if ! nvcc -o "$build/$name" "$here/$program" -lcuda -lpthread >"$build/$name.log" 2>&1; then
        { echo "[nvcc failed]"; cat "$build/$name.log"; } >>"$out"
        continue
    fi
    echo "running $program" >&2
    args=("$ptx")
    [[ $name == destroyed_context ]] && args=()
    run "$out" "$build/$name" "${args[@]}"
    case $name in
    free_while_running) sanitize "$program" "" --tool memcheck -- "$ptx" no-realloc ;;
    out_of_bounds) sanitize "$program" "" --tool memcheck -- "$ptx" ;;
    sanitizer_leak)
        leak=(--tool memcheck --leak-check full --error-exitcode 99)
        sanitize "$program" "" "${leak[@]}" -- "$ptx"
        sanitize "$program" "no-cuda-call." "${leak[@]}" -- "$ptx" no-cuda-call
        ;;
    esac
done

if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    combined=$OUT/c_outputs.txt
    {
        echo "=== environment ==="
        cat "$results/environment.out"
        for program in "${programs[@]}"; do
            echo "=== $program ==="
            if [[ ! -f $results/${program%.c}.out ]]; then
                echo "(not run: it needs two GPUs)"
                continue
            fi
            cat "$results/${program%.c}.out"
            for san in "$results/${program%.c}".sanitizer.out "$results/${program%.c}".*.sanitizer.out; do
                [[ -f $san ]] || continue
                how=${san#"$results/${program%.c}."}
                how=${how%sanitizer.out}
                echo "=== $program under compute-sanitizer${how:+ (${how%.})} ==="
                cat "$san"
            done
        done
    } >"$combined"
    echo "wrote $combined" >&2
else
    [[ $subset == 1 ]] && rm "$results/environment.out"
    written=()
    for program in "${programs[@]}"; do
        for file in "$results/${program%.c}".out "$results/${program%.c}".*sanitizer.out; do
            [[ -f $file ]] || continue
            relative=${file#"$results/"}
            cp "$file" "$here/$relative"
            written+=("docs/c/$relative")
        done
    done
    [[ -f $results/environment.out ]] && cp "$results/environment.out" "$here/" && written+=(docs/c/environment.out)
    echo "wrote ${written[*]}" >&2
fi
