# Sourced by scripts/main.sh and scripts/test.sh: builds with progress a person can read.
#   kiln_step TEXT
#       prints "==> TEXT" (what the script is doing now)
#   kiln_build PRESET CORE_MINUTES [TARGET...]
#       builds the preset's folder (every target, or the ones named), first saying how many
#       steps are left and how long that should take, then "[done/total, seconds]" per step.
#       CORE_MINUTES is the compiler time a cold build of those targets took where it was
#       measured (docs/building.md); once a build of at least that size has run on this
#       machine, its own time (kept in BUILD_DIR/.kiln-build-times) is quoted instead.

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
  steps=$(ninja -C "$dir" -n "$@" 2>/dev/null | grep -cE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true)
  if [ "$steps" -eq 0 ]; then
    kiln_step "Building $what: up to date"
    return 0
  fi
  local before=""
  if [ -f "$dir/.kiln-build-times" ]; then
    # The last build here with at least as many steps on as many cores: "seconds steps cores".
    before=$(awk -v s="$steps" -v c="$cores" '$2 >= s && $3 == c {t = $1} END {if (t) print t}' \
      "$dir/.kiln-build-times")
  fi
  if [ -n "$before" ]; then
    kiln_step "Building $what: $steps steps on $cores cores; a build this size took" \
      "$((before / 60)) min $((before % 60)) s on this machine"
  else
    kiln_step "Building $what: $steps steps on $cores cores; cold, about" \
      "$(((core_minutes + cores - 1) / cores)) min ($core_minutes minutes of compiler time" \
      "on a 2-core Intel Cascade Lake server, fewer with a warm ccache)"
  fi
  local start=$SECONDS cpu_start
  cpu_start=$(kiln_children_cpu_seconds)
  local args=(--build --preset "$preset")
  [ $# -eq 0 ] || args+=(--target "$@")
  NINJA_STATUS="[%f/%t, %e s] " cmake "${args[@]}"
  local took=$((SECONDS - start)) cpu=$(($(kiln_children_cpu_seconds) - cpu_start))
  [ "$steps" -lt 20 ] || echo "$took $steps $cores" >>"$dir/.kiln-build-times"
  echo "built $what in $((took / 60)) min $((took % 60)) s ($steps steps, $((cpu / 60)) min" \
    "$((cpu % 60)) s of compiler time)"
}
