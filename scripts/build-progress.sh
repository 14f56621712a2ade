# Sourced by scripts/main.sh and scripts/test.sh: builds with progress a person can read.
#   kiln_step TEXT
#       prints "==> TEXT" (what the script is doing now)
#   kiln_build PRESET CORE_MINUTES [TARGET...]
#       builds the preset's folder (every target, or the ones named), first saying how many
#       compile and link steps the targets have and how long a cold build of them takes, then
#       "[done/total, seconds]" per step (total: what is left to do).
#       CORE_MINUTES is the compiler time a cold build of those targets took where it was
#       measured (docs/building.md); afterwards the build's own wall and CPU time are printed.

kiln_step() { printf '\n==> %s\n' "$*"; }

# CPU seconds (user + system) of this shell's finished children: fields cutime and cstime.
kiln_children_cpu_seconds() {
  awk -v tck="$(getconf CLK_TCK)" '{print int(($16 + $17) / tck)}' "/proc/$$/stat"
}

kiln_build() {
  local preset="$1" core_minutes="$2"
  shift 2
  local dir=build
  [ "$preset" = default ] || dir="build-$preset"
  local cores steps what="${*:-every target}"
  cores=$(nproc)
  # Every compile and link step of the targets (what a cold build runs; ninja's dry run cannot
  # count what is left: it stops at the glob check's re-run of cmake).
  steps=$(ninja -C "$dir" -t commands "$@" 2>/dev/null | grep -cE ' -c | -o ' || true)
  kiln_step "Building $what: $steps compile and link steps on $cores cores; cold, about" \
    "$(((core_minutes + cores - 1) / cores)) min ($core_minutes minutes of compiler time on a" \
    "2-core Intel Cascade Lake server; less with a warm ccache)"
  local start=$SECONDS cpu_start
  cpu_start=$(kiln_children_cpu_seconds)
  local args=(--build --preset "$preset")
  [ $# -eq 0 ] || args+=(--target "$@")
  NINJA_STATUS="[%f/%t, %e s] " cmake "${args[@]}"
  local took=$((SECONDS - start)) cpu=$(($(kiln_children_cpu_seconds) - cpu_start))
  echo "built $what in $((took / 60)) min $((took % 60)) s ($steps steps, $((cpu / 60)) min" \
    "$((cpu % 60)) s of compiler time)"
}
