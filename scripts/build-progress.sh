# Sourced by scripts/main.sh and scripts/test.sh: builds with progress a person can read.
#   kiln_step TEXT
#       prints "==> TEXT" (what the script is doing now)
#   kiln_build PRESET CORE_MINUTES [TARGET...]
#       builds the preset's folder (every target, or the ones named), first saying how many
#       compile and link steps the targets have and how long a cold build of them takes, then
#       "[done/total, seconds]" per step (total: what is left to do).
#       CORE_MINUTES is the compiler time a cold build of those targets took where it was
#       measured (docs/building.md); afterwards the build's own wall and CPU time are printed
#       and kept in DIR/.kiln-build-times, which the next build of the same targets quotes.

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
  # This machine's last build of the same targets that compiled anything (DIR/.kiln-build-times:
  # one line per build, "targets<TAB>steps run<TAB>seconds<TAB>CPU seconds").
  local times="$dir/.kiln-build-times" last=""
  [ -f "$times" ] && last=$(awk -F'\t' -v w="$what" '$1 == w {l = $0} END {print l}' "$times")
  local here=""
  if [ -n "$last" ]; then
    local l_steps l_secs l_cpu
    l_steps=$(cut -f2 <<<"$last")
    l_secs=$(cut -f3 <<<"$last")
    l_cpu=$(cut -f4 <<<"$last")
    here="; its last build here ran $l_steps steps in $((l_secs / 60)) min $((l_secs % 60)) s"
    here+=" ($((l_cpu / 60)) min of compiler time)"
  fi
  kiln_step "Building $what: $steps compile and link steps on $cores cores; cold, about" \
    "$(((core_minutes + cores - 1) / cores)) min ($core_minutes minutes of compiler time on a" \
    "2-core x86-64 server; less with a warm ccache)$here"
  local start=$SECONDS cpu_start
  cpu_start=$(kiln_children_cpu_seconds)
  local args=(--build --preset "$preset")
  [ $# -eq 0 ] || args+=(--target "$@")
  # The output as it comes, counting the steps ninja ran (the last "[done/total" it printed).
  NINJA_STATUS="[%f/%t, %e s] " cmake "${args[@]}" 2>&1 | {
    local line ran=0
    while IFS= read -r line; do
      printf '%s\n' "$line"
      [[ $line =~ ^\[([0-9]+)/[0-9]+,[^]]*\]\ (Building|Linking) ]] && ran=${BASH_REMATCH[1]}
    done
    echo "$ran" > "$dir/.kiln-build-ran"
  }
  local took=$((SECONDS - start)) cpu=$(($(kiln_children_cpu_seconds) - cpu_start))
  local ran
  ran=$(cat "$dir/.kiln-build-ran" 2>/dev/null || echo 0)
  echo "built $what in $((took / 60)) min $((took % 60)) s ($ran of its $steps steps run," \
    "$((cpu / 60)) min $((cpu % 60)) s of compiler time)"
  [ "$ran" -gt 0 ] && printf '%s\t%s\t%s\t%s\n' "$what" "$ran" "$took" "$cpu" >> "$times"
  return 0
}
