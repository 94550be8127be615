#!/bin/sh
# The seeds' kernel-compile benchmark in small (issue 17): `make -j1` of a C project of
# N files (default 30) traced whole under qemu-user (make, gcc, cc1, as, collect2, ld),
# then the trace replayed on every preset.
#   experiments/make-compile.sh [N] [XLAT]     (XLAT: default target/optimized/xlat,
#   the fully optimized build: cargo build --profile optimized)
set -eu
n=${1:-30}
xlat=$(realpath "${2:-target/optimized/xlat}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/proj"
i=1
while [ "$i" -le "$n" ]; do
    cat > "$dir/proj/f$i.c" <<C
#include <string.h>
struct rec$i { char name[32]; int v[16]; };
int f$i(const char *s, int k) {
    struct rec$i r;
    strncpy(r.name, s, sizeof r.name - 1);
    int t = 0;
    for (int j = 0; j < 16; j++) { r.v[j] = j * k + $i; t += r.v[j] ^ (int)strlen(r.name); }
    return t;
}
C
    i=$((i + 1))
done
{
    i=1
    while [ "$i" -le "$n" ]; do echo "int f$i(const char *, int);"; i=$((i + 1)); done
    echo 'int main(int c, char **v) { int t = 0;'
    i=1
    while [ "$i" -le "$n" ]; do echo "  t += f$i(v[0], c);"; i=$((i + 1)); done
    echo '  return t == 42; }'
} > "$dir/proj/main.c"
printf 'SRCS := $(wildcard *.c)\nprog: $(SRCS:.c=.o)\n\tgcc -o $@ $^\n%%.o: %%.c\n\tgcc -O2 -c $< -o $@\n' \
    > "$dir/proj/Makefile"
echo "== xlat trace -- make -j1 ($n files + main.c)"
"$xlat" trace -o "$dir/make.xlt" -- make -s -j1 -C "$dir/proj"
"$xlat" trace --info "$dir/make.xlt" | sed -n '/^programs/,/^integrity/p' | head -16
echo "== replay on every preset"
set --
for m in $("$xlat" machines | awk '{print $1}'); do set -- "$@" -m "$m"; done
"$xlat" sim "$@" -t "$dir/make.xlt" 2>&1 | grep -v '^xlat: warning'
